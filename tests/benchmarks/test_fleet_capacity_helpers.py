"""The helpers of the fleet-scale capacity benchmark (benchmarks/fleet_capacity.py): the raw
equivalents of the dashboard's queries, the backfill passes of the recording rules, and the
synthetic history promtool turns into blocks."""

from __future__ import annotations

import json
import subprocess

import promql_parser
import pytest

from benchmarks._fleet_history import FleetHistory, FleetScale, block_seconds
from benchmarks._raw_queries import (
    RawEquivalents,
    levels,
    recorded_names,
    rule_file,
    rules_of,
)
from benchmarks.fleet_capacity import capacity_dashboard, merged_count, substitute
from exporter.generate.recording import recording_rules
from exporter.thresholds.table import load_thresholds
from tests.support.tools import tool

RULES = rules_of(recording_rules(load_thresholds(), windows={"rollup_interval": "600s"}), 300.0)


def test_every_capacity_panel_query_has_a_raw_equivalent_prometheus_can_parse():
    _, _, targets = capacity_dashboard()
    raw = RawEquivalents(RULES)
    assert targets
    for target in targets:
        query = substitute(target.expr, 3600)
        expanded = raw.expand(query)
        assert recorded_names(query), f"{target.panel}: reads no recorded series: {query}"
        assert not recorded_names(expanded), expanded
        promql_parser.parse(expanded)


def test_a_range_over_a_recorded_series_becomes_a_subquery_at_its_rules_interval():
    raw = RawEquivalents(RULES)
    projected = raw.expand("predict_linear(cluster:npu_chips_in_use:sum[7d], 30 * 86400)")
    assert projected.startswith("predict_linear(((sum by () (") and "[7d:300s], 30 * 86400)" in projected
    daily = raw.expand("chip:npu_aicore_utilization_ratio:avg1d")
    assert daily == "(avg_over_time(((avg_over_time(npu_aicore_utilization_ratio[1h])))[1d:600s]))"


def test_the_peak_hbm_panel_reads_one_series_per_node_and_its_raw_equivalent_is_the_rules_expression():
    _, _, targets = capacity_dashboard()
    peak = [substitute(t.expr, 3600) for t in targets if t.panel == "Peak HBM use (daily)"]
    assert peak == ["cluster:npu_hbm_usage:max1d", "instance:npu_hbm_usage:max1d"]
    per_chip = "(max_over_time(((npu_hbm_used_bytes / (npu_hbm_total_bytes > 0)))[1d:300s]))"
    assert RawEquivalents(RULES).expand(peak[1]) == f"(max by (job, instance) ({per_chip}))"


def test_a_rules_own_labels_pick_the_rule_and_stay_on_the_raw_answer():
    raw = RawEquivalents(RULES)
    median = raw.expand('cluster:npu_aicore_utilization_ratio:quantile_avg1h{quantile="0.5"}')
    assert median == ('label_replace((quantile by () (0.5, (avg_over_time(npu_aicore_utilization_ratio[1h])))), "quantile", "0.5", "", "")')
    with pytest.raises(ValueError, match="matches 3 recording rules"):
        raw.expand("cluster:npu_aicore_utilization_ratio:quantile_avg1h")
    with pytest.raises(ValueError, match="matches 0"):
        raw.expand('instance:npu_chips:count{instance="a"}')
    assert raw.expand('instance:npu_chips:count{job=~".*"}') == raw.expand("instance:npu_chips:count")


def test_each_backfill_pass_reads_only_raw_series_and_earlier_passes():
    passes = levels(RULES)
    assert len(passes) >= 2 and sum(map(len, passes)) == len(RULES)
    done: set[str] = set()
    for batch in passes:
        for rule in batch:
            assert recorded_names(rule.expr) <= done, rule.record
        done |= {rule.record for rule in batch}
    with pytest.raises(ValueError, match="no rule records"):
        levels([r for r in RULES if r.record != "chip:npu_in_use:bool"])


def test_a_pass_file_keeps_the_groups_and_their_intervals():
    doc = rule_file(levels(RULES)[1], 300.0)
    intervals = {g["name"]: g.get("interval") for g in doc["groups"]}
    # the second pass: rules reading the first pass's records, each in its shipped group
    # (the goodput group's MFU over the wall time reads its 1h goodput ratio)
    assert intervals == {"cann-exporter-capacity-5m": None, "cann-exporter-capacity-rollups": "600s", "cann-exporter-goodput": None}
    assert rules_of(doc, 300.0) == levels(RULES)[1]


def test_overlapping_blocks_merge_into_one_per_group():
    metas = [
        {"minTime": 0, "maxTime": 10},
        {"minTime": 2, "maxTime": 12},
        {"minTime": 12, "maxTime": 20},
        {"minTime": 15, "maxTime": 18},
        {"minTime": 30, "maxTime": 40},
    ]
    assert merged_count(metas) == 3
    assert merged_count([]) == 0


def test_the_history_covers_its_range_once_in_block_aligned_windows(tmp_path):
    scale = FleetScale(nodes=3, chips=2, days=0.5)
    history = FleetHistory(scale, 1_800_000_123)
    block = block_seconds(scale.days)
    windows = list(history.windows(block))
    assert windows[0][0] == history.start and windows[-1][1] == history.end
    assert all(b[0] - a[1] == scale.resolution for a, b in zip(windows, windows[1:]))
    assert all(first // block == last // block for first, last in windows)
    lines = 0
    for first, last in windows:
        path = tmp_path / "w.om"
        stats = history.write(path, first, last)
        text = path.read_text()
        assert text.endswith("\n# EOF\n") and text.count("\n") - 1 == stats.samples
        times = {int(line.rsplit(" ", 1)[1]) for line in text.splitlines()[:-1]}
        assert min(times) == first and max(times) == last
        lines += stats.samples
    assert lines and history.series_count() >= (4 * scale.chips + 1) * scale.nodes
    with pytest.raises(ValueError, match="follow each other"):
        history.write(tmp_path / "again.om", *windows[0])
    again = FleetHistory(scale, 1_800_000_123)
    again.write(tmp_path / "again.om", *windows[0])
    history_first = FleetHistory(scale, 1_800_000_123)
    history_first.write(tmp_path / "first.om", *windows[0])
    assert (tmp_path / "again.om").read_bytes() == (tmp_path / "first.om").read_bytes()


def test_promtool_turns_a_window_into_one_block_with_every_sample(tmp_path):
    promtool = tool("promtool")
    scale = FleetScale(nodes=4, chips=8, days=1)
    history = FleetHistory(scale, 1_800_000_000)
    block = block_seconds(scale.days)
    first, last = next(history.windows(block))
    stats = history.write(tmp_path / "w.om", first, last)
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            f"--max-block-duration={block}s",
            "openmetrics",
            "-q",
            str(tmp_path / "w.om"),
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    metas = [json.loads(p.read_text()) for p in (tmp_path / "data").glob("*/meta.json")]
    assert len(metas) == 1
    assert metas[0]["stats"]["numSamples"] == stats.samples
    assert metas[0]["minTime"] == first * 1000 and metas[0]["maxTime"] == last * 1000 + 1


def test_a_failed_reader_query_is_timed_and_answers_no_series():
    from benchmarks._common import free_port
    from benchmarks.fleet_capacity import TimedClient

    client = TimedClient(f"http://127.0.0.1:{free_port()}", timeout=2.0)  # nothing listens there
    assert client.range("up", 0, 3600, 60) == [] and client.instant("up", 0) == []
    assert [(c["endpoint"], c["query"], c["series"]) for c in client.calls] == [("query_range", "up", 0), ("query", "up", 0)]
    assert all(c["error"] and c["seconds"] >= 0 for c in client.calls)


def _samples(text: str) -> dict[tuple[str, str], dict[int, float]]:
    """{(metric, labels): {time: value}} of OpenMetrics lines."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, value, ts = line.rsplit(" ", 2)
        name, _, labels = head.partition("{")
        out.setdefault((name, "{" + labels), {})[int(ts)] = float(value)
    return out


def test_the_hourly_records_are_what_the_rules_make_of_the_raw_samples(tmp_path):
    from benchmarks._fleet_records import HourlyRecords

    scale = FleetScale(nodes=4, chips=2, days=1.5)
    end, rollup = 1_800_003_600, 600
    raw_history = FleetHistory(scale, end, energy=True)  # every step as raw samples
    raw_history.write(tmp_path / "raw.om", raw_history.start, raw_history.end)
    raw = _samples((tmp_path / "raw.om").read_text())
    history = FleetHistory(scale, end, raw_days=0.5, energy=True)  # the same fleet: records before its last half day
    windows = list(history.record_windows(block_seconds(scale.days)))
    assert windows[0][0] == history.start and windows[-1][1] == history.raw_start - scale.resolution
    writer = HourlyRecords(history, rollup)
    records: dict[tuple[str, str], dict[int, float]] = {}
    for first, last in windows:
        writer.write(tmp_path / "r.om", first, last)
        for key, points in _samples((tmp_path / "r.om").read_text()).items():
            records.setdefault(key, {}).update(points)
    assert list(history.windows(block_seconds(scale.days)))[0][0] == history.raw_start
    hours = [t for t in range(history.end, history.start, -3600) if t < history.raw_start]
    util = {labels: points for (name, labels), points in raw.items() if name == "npu_aicore_utilization_ratio"}
    checked = 0
    for labels, points in util.items():
        for t in hours:
            inside = [v for at, v in points.items() if t - 3600 < at <= t]
            got = records.get(("chip:npu_aicore_utilization_ratio:avg1h", labels), {}).get(t)
            if not inside:
                assert got is None
                continue
            assert got == pytest.approx(sum(inside) / len(inside), abs=1e-6)
            evaluations = sum(
                any(e - rollup < at <= e for at in points) and any(e - 2 * rollup < at <= e - rollup for at in points)
                for e in range(t, t - 3600, -rollup)
            )
            assert records.get(("chip:npu_observed_seconds:sum1h", labels), {}).get(t, 0) == evaluations * rollup
            busy = any(
                t - 3600 < at <= t
                for (name, other), pts in raw.items()
                if name == "npu_process_memory_bytes" and other.startswith(labels[:-1])
                for at in pts
            )
            assert records[("chip:npu_in_use:max1h", labels)][t] == float(busy)
            checked += 1
    assert checked > 100
    spaces = {(labels, t) for (name, labels), pts in records.items() if name == "chip:npu_pod_info:max1h" for t in pts}
    assert spaces and all(t in hours for _, t in spaces)
    # Energy: a node's kWh in the hour is what its chips' counters rose by (they count from the
    # history's start), its idle and per-namespace parts no more than that.
    joules = {labels: points for (name, labels), points in raw.items() if name == "npu_energy_joules_total"}
    energy_checked, idle_total, space_total = 0, 0.0, 0.0
    for t in hours:
        for node in {labels.split(",npu=")[0] + "}" for labels in joules}:
            kwh = records.get(("instance:npu_energy_kwh:sum1h", node), {}).get(t)
            rose = [
                max((v for at, v in pts.items() if at <= t), default=0.0) - max((v for at, v in pts.items() if at <= t - 3600), default=0.0)
                for labels, pts in joules.items()
                if labels.startswith(node[:-1] + ",")
            ]
            if kwh is None:
                assert sum(rose) == 0
                continue
            assert kwh == pytest.approx(sum(rose) / 3.6e6, rel=1e-4)
            idle = records[("instance:npu_energy_idle_kwh:sum1h", node)][t]
            per_space = [
                pts[t]
                for (name, labels), pts in records.items()
                if name == "instance_namespace:npu_energy_kwh:sum1h" and labels.startswith(node[:-1]) and t in pts
            ]
            assert 0 <= idle <= kwh * (1 + 1e-6) and sum(per_space) <= kwh * (1 + 1e-6)
            energy_checked, idle_total, space_total = energy_checked + 1, idle_total + idle, space_total + sum(per_space)
    assert energy_checked > 20 and idle_total > 0 and space_total > 0
