"""`report` on the hourly recording rules: a real Prometheus holding three days of a small
synthetic fleet (benchmarks/_fleet_history.py: jobs, idle spells, churn of process and pod
series, a node joining late, outages), the shipped rules backfilled over it by `promtool tsdb
create-blocks-from rules` as benchmarks/fleet_capacity.py does at fleet scale. The report
reads the records (never a raw per-chip series over the range) and tells the same story as
the same window read from the raw series, energy included (the history with its energy counters)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from benchmarks import _common as c
from benchmarks._fleet_history import BUSY_WATTS, IDLE_WATTS, FleetHistory, FleetScale, retention_days
from benchmarks._raw_queries import rules_of
from benchmarks.fleet_capacity import Server, backfill_history, backfill_rules
from exporter.diagnostics import capacity_reader
from exporter.diagnostics.capacity import analyse_capacity
from exporter.diagnostics.capacity_reader import fit_window, read_capacity
from exporter.diagnostics.energy import analyse_energy
from exporter.diagnostics.energy_reader import read_energy
from exporter.diagnostics.promapi import PrometheusClient
from exporter.generate.recording import recording_rules
from exporter.npusmi.metrics import ENERGY
from exporter.thresholds.records import REPORT_UTIL
from exporter.thresholds.table import load_thresholds
from tests.support.tools import tool

SCALE = FleetScale(nodes=4, chips=2, days=3, resolution=300)
ROLLUP = 2 * SCALE.resolution  # as the benchmark: a chip observed through an interval needs a sample in it and the one before
MONTH = 30 * 86400.0

pytestmark = pytest.mark.timeout(300)


@dataclass
class Recording(PrometheusClient):
    """The report's own client, keeping every query it sends."""

    sent: list[tuple[str, str]] = field(default_factory=list)

    def _call(self, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
        self.sent.append((endpoint, params.get("query", "")))
        return super()._call(endpoint, params)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    tool("prometheus"), tool("promtool")  # the benchmark's helpers run them from PATH
    work = tmp_path_factory.mktemp("recorded")
    history = FleetHistory(SCALE, int(time.time()) // 60 * 60 - 53, energy=True)
    server = Server(work, work / "data", retention_days(SCALE.days))
    backfill_history(history, server.data, work)
    rules = rules_of(recording_rules(load_thresholds(), windows={"rollup_interval": f"{ROLLUP}s"}), SCALE.resolution)
    # a rate needs two samples in its window: the 5m energy rate reads 10m of this 5-minute history
    rules = [dataclasses.replace(r, expr=r.expr.replace(f"{ENERGY.name}[5m]", f"{ENERGY.name}[10m]")) for r in rules]
    backfill_rules(server, rules, history, work)
    with server.running(lookback=ROLLUP, name="recorded") as prom:
        yield prom.url, history.end


def _report(url: str, end: int, recorded: bool | None) -> tuple[Any, Any, Recording]:
    window, data, _, client = _with_energy(url, end, recorded)
    return window, data, client


def _with_energy(url: str, end: int, recorded: bool | None) -> tuple[Any, Any, Any, Recording]:
    client = Recording(url, timeout=60.0)
    window = fit_window(client, float(end), MONTH, None, "")
    use = window.recorded if recorded is None else recorded
    data = read_capacity(client, window.first, window.last, window.step, "", None, window.requested, recorded=use)
    energy = read_energy(client, window.first, window.last, window.step, "", use)
    return window, data, energy, client


def test_a_month_is_read_from_the_hourly_records_cut_to_where_they_begin(served: tuple[str, int]) -> None:
    window, data, client = _report(*served, recorded=None)
    assert window.recorded and window.step == 3600 and window.requested == MONTH
    assert served[1] - window.first < 3 * 86400 + 3600, "the window begins where the records do"
    every_hour = PrometheusClient(served[0], timeout=60.0).range(f"count({REPORT_UTIL})", window.last - MONTH + 3600, window.last, 3600)
    assert window.first == min(t for t, _ in every_hour[0].points), "to the hour (found per day, then per hour of that day)"
    assert any("hourly recording rules" in n for n in data.notes), data.notes
    ranges = [q for endpoint, q in client.sent if endpoint == "query_range"]
    raw = ("npu_aicore_utilization_ratio{", "npu_up", "npu_pod_info", "npu_process_memory_bytes", "npu_hbm_", "npu_health")
    for query in ranges:
        bare = query.replace("chip:npu_aicore_utilization_ratio:avg1h", "")
        assert ":" in query and not any(name in bare.split(":")[0] for name in raw), query
    assert {c.instance for c in data.chips} == {f"npu-node-{n:04d}:9435" for n in range(SCALE.nodes)}


def test_the_records_tell_what_the_raw_series_tell(served: tuple[str, int]) -> None:
    table = load_thresholds()
    _, recorded, _ = _report(*served, recorded=True)
    _, raw, _ = _report(*served, recorded=False)
    a, b = analyse_capacity(recorded, table, 30.0).totals, analyse_capacity(raw, table, 30.0).totals
    assert a["chips"] == b["chips"] == SCALE.nodes * SCALE.chips
    for key, tolerance in (("chip_hours", 0.02), ("idle_chip_hours", 0.05), ("unused_chip_hours", 0.05)):
        assert a[key] == pytest.approx(b[key], rel=tolerance), (key, a[key], b[key])
    for key in ("mean_utilization_in_use", "mean_utilization_all", "allocation"):
        assert a[key] == pytest.approx(b[key], abs=0.02), (key, a[key], b[key])
    assert {n.instance for n in recorded.hbm} == {n.instance for n in raw.hbm}
    assert recorded.namespaces_known and recorded.in_use_known


def test_energy_from_the_records_is_the_energy_of_the_raw_series(served: tuple[str, int]) -> None:
    _, data, recorded, _ = _with_energy(*served, recorded=True)
    _, raw_data, raw, _ = _with_energy(*served, recorded=False)
    assert recorded.totals is not None and raw.totals is None  # node-sized records, else per chip and step
    a, b = analyse_energy(recorded, data, 0.6), analyse_energy(raw, raw_data, 0.6)
    assert a is not None and b is not None and a.total_kwh > 0
    assert a.total_kwh == pytest.approx(b.total_kwh, rel=0.02)
    assert {n.name: n.kwh for n in a.nodes} == pytest.approx({n.name: n.kwh for n in b.nodes}, rel=0.02)
    # a pod's first and last hour: the record's (the pod at each evaluation) against the raw step's (the pod in it)
    chip_hour = (IDLE_WATTS + BUSY_WATTS) / 1000
    assert {n.name: n.kwh for n in a.namespaces} == pytest.approx({n.name: n.kwh for n in b.namespaces}, rel=0.05, abs=chip_hour)
    # idle at the rules' 5-minute resolution against the report's hourly steps: close, not equal
    assert 0 < a.idle_kwh < a.total_kwh and a.idle_kwh == pytest.approx(b.idle_kwh, rel=0.1)
    assert a.jobs == b.jobs == ()  # the fleet history has no training-job series


def test_per_chip_records_are_read_in_batches_of_nodes(served: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    _, whole, _ = _report(*served, recorded=True)
    monkeypatch.setattr(capacity_reader, "BATCH_CHIPS", SCALE.chips + 1)
    _, batched, client = _report(*served, recorded=True)
    assert sum('instance=~"' in q for _, q in client.sent) >= SCALE.nodes, "one batch per node"
    assert batched.chips == whole.chips and batched.hbm == whole.hbm
    assert c.HOST == "127.0.0.1"


def test_the_nodes_with_records_are_asked_for_once(served: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """fit_window's per-node answer makes the batches of every per-chip read, as `report` passes
    it (the energy reads node-sized records, unbatched): the query over every chip's records is
    sent once, not once per reader."""
    url, end = served
    _, asked, _ = _report(url, end, recorded=True)  # batches found by each reader itself
    monkeypatch.setattr(capacity_reader, "BATCH_CHIPS", 3 * SCALE.chips)
    client = Recording(url, timeout=60.0)
    window = fit_window(client, float(end), MONTH, None, "")
    assert dict(window.nodes) == {f"npu-node-{n:04d}:9435": SCALE.chips for n in range(SCALE.nodes)}
    data = read_capacity(
        client, window.first, window.last, window.step, "", None, window.requested, recorded=True, nodes=dict(window.nodes)
    )
    read_energy(client, window.first, window.last, window.step, "", True)
    over_every_chip = [
        q for _, q in client.sent if q.startswith("count by (instance) (last_over_time(chip:npu_aicore_utilization_ratio:avg1h")
    ]
    assert len(over_every_chip) == 1, over_every_chip
    assert sum('instance=~"' in q for _, q in client.sent) > 2, "read in batches"
    assert data.chips == asked.chips and data.hbm == asked.hbm
