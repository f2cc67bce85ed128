"""`cann-exporter report --range 30d` (the documented command) on a Prometheus that holds 7
minutes of one node, as on day one: the report covers what exists and says how much, with a
step sized to it, numbers with the precision they need, every chip below 60% named with its
average, and each empty section saying why.

The node: 8 chips scraped every 30 s with a process on chips 0-6; chips 1 and 4 at 35% and
42% (below the bound), the others at 90%; chip 7 idle (nothing on it). No HBM and no pod
series. The history ends 37 s past a minute, so the window's end is not a whole hour."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_report
from tests.support.prometheus import Prometheus, build_blocks, serving_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
SCRAPE, MINUTES = 30, 7
INSTANCE = "npu-1:9435"
UTIL = {1: 0.35, 4: 0.42, 7: 0.0}
BUSY = 0.90
IN_USE = range(7)


def history(now: int) -> Iterator[str]:
    times = range(now - MINUTES * 60, now + 1, SCRAPE)

    def labels(npu: int, **extra: str) -> str:
        pairs = {"instance": INSTANCE, "job": "cann-exporter", "npu": npu, "chip": 0, "device": npu, **extra}
        return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"

    yield "# TYPE npu_aicore_utilization_ratio gauge"
    for npu in range(8):
        yield from (f"npu_aicore_utilization_ratio{labels(npu)} {UTIL.get(npu, BUSY)} {t}" for t in times)
    yield "# TYPE npu_process_memory_bytes gauge"
    for npu in IN_USE:
        yield from (f"npu_process_memory_bytes{labels(npu, pid=str(100 + npu), process='python')} 1073741824 {t}" for t in times)
    yield "# EOF"


@pytest.fixture(scope="module")
def day_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    root = tmp_path_factory.mktemp("day-one")
    now = int(time.time()) // 60 * 60 - 23  # 37 s past a minute, just in the past
    with serving_blocks(build_blocks(history(now), root), root, now) as served:
        yield served


@pytest.fixture(scope="module")
def report_30d(day_one: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report-30d")
    result = run_report("--prometheus", day_one.url, "--range", "30d", "--end", str(day_one.now), "--out", str(out))
    assert result.code == 0, result.err
    return out


def doc(out: Path) -> dict:
    return json.loads((out / "capacity.json").read_text())


def test_a_range_longer_than_the_data_covers_what_exists_and_says_how_much(report_30d: Path) -> None:
    d = doc(report_30d)
    assert d["requested"] == 30 * 86400 and d["step"] == 60
    # the data's 7 minutes (the first step found to within a minute), not 30 days
    assert MINUTES * 60 - 60 <= d["covered"] <= MINUTES * 60 + 60
    assert d["end"] == d["covered"] + d["start"]
    assert d["findings"][0].startswith("Prometheus holds ") and "of data of the 30d asked for" in d["findings"][0]
    assert any(n.startswith("--range asked for 30d; npu_aicore_utilization_ratio begins ") for n in d["notes"])
    html = (report_30d / "index.html").read_text()
    assert "step 1m ·" in html and "of data; 30d asked for)" in html and "step 0.0" not in html


def test_numbers_keep_their_precision(report_30d: Path) -> None:
    d = doc(report_30d)
    t = d["totals"]
    minutes = t["chip_hours"] * 60
    assert 8 * (MINUTES - 1.7) <= minutes <= 8 * MINUTES  # the last 37 s are after the window's end
    assert t["idle_chip_hours"] == pytest.approx(t["chip_hours"] / 8)
    unused = t["unused_chip_hours"]
    assert 0.1 < unused < 1
    # an amount under 1 chip-hour shows two significant digits, never "0"
    summary = next(f for f in d["findings"] if f.startswith("Idle chip-hours"))
    assert f"unused (not busy) chip-hours: {unused:.2g}." in summary
    assert f"<td>{unused:.2g}</td>" in (report_30d / "index.html").read_text()


def test_every_chip_below_the_bound_is_named_with_its_average(report_30d: Path) -> None:
    d = doc(report_30d)
    below = [(c["subject"], round(c["mean_utilization"], 3)) for c in d["chips_below"]]
    assert below == [(f"device 1 (NPU 1, chip 0) on {INSTANCE}", 0.35), (f"device 4 (NPU 4, chip 0) on {INSTANCE}", 0.42)]
    summary = next(f for f in d["findings"] if f.startswith("Chips in use averaging below 60%"))
    assert summary == (
        f"Chips in use averaging below 60%: device 1 (NPU 1, chip 0) on {INSTANCE} (35.0%), device 4 (NPU 4, chip 0) on {INSTANCE} (42.0%)."
    )
    # the node as a whole is above the bound: it is not in the nodes' list, its chips are
    assert not any(f.startswith("Nodes below") for f in d["findings"])
    html = (report_30d / "index.html").read_text()
    assert f"<td>device 4 (NPU 4, chip 0) on {INSTANCE}</td><td>42.0%</td><td>100.0%</td>" in html


def test_empty_sections_say_why(report_30d: Path) -> None:
    d = doc(report_30d)
    assert set(d["empty"]) == {"utilization_namespaces", "owners", "hbm_headroom", "forecast"}
    assert set(d["charts"]) == {"utilization_nodes", "distribution", "idle_chip_hours", "below_threshold", "allocation"}
    html = (report_30d / "index.html").read_text()
    assert "need at least 3 days with data; this window has 7m" in html or "need at least 3 days with data; this window has 6m" in html
    assert "Prometheus has no npu_pod_info series" in html
    assert "Prometheus has no npu_chip_owner_info series" in html and d["owners"] == []
    assert "Prometheus has no npu_hbm_used_bytes / npu_hbm_total_bytes series" in html
    assert "see the notes below" not in html


def test_a_given_step_is_kept(day_one: Prometheus, tmp_path: Path) -> None:
    result = run_report("--prometheus", day_one.url, "--range", "1d", "--step", "5m", "--end", str(day_one.now), "--out", str(tmp_path))
    assert result.code == 0, result.err
    d = doc(tmp_path)
    assert d["step"] == 300 and d["requested"] == 86400 and d["covered"] in (300, 600)
