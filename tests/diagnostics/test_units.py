"""The pure parts on their own: verdict logic, capacity arithmetic, parsing helpers, renderers."""

from __future__ import annotations

import io
import json
import math

import pytest

from exporter.commands.diagnose import use_colour
from exporter.core.values import format_duration
from exporter.diagnostics.analysis import analyse
from exporter.diagnostics.capacity import (
    CapacityInput,
    ChipHistory,
    NodeHbm,
    analyse_capacity,
    choose_step,
)
from exporter.diagnostics.capacity_text import hours_text, pct_text
from exporter.diagnostics.charts import COLOURS, DASHES, MAX_LINES, lowest, series_style
from exporter.diagnostics.chip_checks import isolated_pages_verdict, unstable_verdict
from exporter.diagnostics.forecast import daily, forecast, linear_fit
from exporter.diagnostics.model import (
    ChipStats,
    JobStats,
    Observations,
    PageCount,
    Report,
    worst,
)
from exporter.diagnostics.promapi import (
    parse_duration,
    parse_selector,
    parse_time,
    selector,
)
from exporter.diagnostics.render import (
    format_value,
    render_json,
    render_markdown,
    render_text,
)
from exporter.diagnostics.scrape_reader import Scrape, chips_from
from exporter.thresholds.table import load_thresholds

TABLE = load_thresholds()


# --- analysis ---------------------------------------------------------------------------------------------


def test_isolated_pages_verdict_follows_the_alert_tiers() -> None:
    # (total, double-bit, new in the window) against the table's limit 64 and new-page threshold 0
    assert isolated_pages_verdict(64, 0, 0, 64, 0) == "healthy"  # at the limit, nothing new
    assert isolated_pages_verdict(65, 0, 0, 64, 0) == "abnormal"  # above it
    assert isolated_pages_verdict(1, 1, 0, 64, 0) == "abnormal"  # one double-bit page
    assert isolated_pages_verdict(3, 0, 1, 64, 0) == "warning"  # a new single-bit page
    assert isolated_pages_verdict(3, 0, None, 64, 0) == "healthy"  # one reading: nothing to compare


def test_pages_between_scrapes_are_new_pages() -> None:
    def scrape(at: float, single: float) -> Scrape:
        chip = (("chip", "0"), ("device", "1"), ("npu", "1"))
        return Scrape(
            at,
            (
                ("npu_aicore_utilization_ratio", chip, 0.9),
                ("npu_ecc_isolated_pages", (*chip, ("memory", "hbm"), ("type", "single_bit")), single),
                ("npu_ecc_isolated_pages", (*chip, ("memory", "hbm"), ("type", "double_bit")), 0.0),
            ),
        )

    (one,) = chips_from([scrape(0, 2), scrape(10, 3)])
    assert one.isolated_pages == (PageCount("hbm", "double_bit", 0.0), PageCount("hbm", "single_bit", 3.0))
    assert one.new_isolated_pages == 1
    report = analyse(Observations("t", chips=(one,)), TABLE)
    (finding,) = report.at("hardware")
    assert (finding.value, finding.verdict, finding.detail) == (3, "warning", "hbm single_bit 3; 1 new in the window")
    assert chips_from([scrape(0, 2)])[0].new_isolated_pages is None


@pytest.mark.parametrize(
    "stddev,mean,expected",
    [
        (0.16, 0.5, "abnormal"),
        (0.15, 0.5, "healthy"),
        (0.3, 0.9, "warning"),
        (0.0, 0.2, "healthy"),
    ],
)
def test_unstable_verdict(stddev: float, mean: float, expected: str) -> None:
    assert unstable_verdict(stddev, mean, threshold=0.15, mean_below=0.85) == expected


def test_utilization_verdicts_follow_the_table() -> None:
    chips = (
        ChipStats("", "0", "0", "0", 0.86),
        ChipStats("", "1", "0", "1", 0.85),
        ChipStats("", "2", "0", "2", 0.59),
        ChipStats("", "3", "0", "3", 0.0, in_use=False),
    )
    report = analyse(Observations("test", chips=chips), TABLE)
    assert [f.verdict for f in report.findings] == ["healthy", "warning", "abnormal", None]
    assert report.verdict == "abnormal" and report.exit_code == 1


def test_jobs_idle_stall_and_split() -> None:
    job = JobStats("n", "j", "0", 0.1, 8.5, 85.0, 0.85, (("h2d", 0.2), ("d2h", 0.11), ("framework", 0.05)), 700.0)
    found = {f.check: f for f in analyse(Observations("t", jobs=(job,)), TABLE).findings}
    assert found["idle_gaps"].value == pytest.approx(0.15) and found["idle_gaps"].verdict == "warning"
    assert found["stall"].verdict == "abnormal"
    assert found["memcpy_share"].value == pytest.approx(0.31) and found["memcpy_share"].verdict == "abnormal"
    assert found["framework_share"].verdict == "healthy"
    assert found["phase.h2d"].verdict is None and found["phase.h2d"].level == "meso"


def test_jobs_show_the_loops_own_phase_words_and_judge_their_stages() -> None:
    shares = (("forward", 0.3), ("backward", 0.4), ("copy_in", 0.2), ("to_host", 0.11), ("dispatch", 0.05))
    job = JobStats("n", "j", "0", 0.1, 8.5, 85.0, 0.85, shares, 10.0)
    found = {f.check: f for f in analyse(Observations("t", jobs=(job,)), TABLE).findings}
    assert found["phase.forward"].title == "forward share of the step (compute)"
    assert found["phase.copy_in"].value == pytest.approx(0.2)
    assert found["memcpy_share"].value == pytest.approx(0.31) and found["memcpy_share"].verdict == "abnormal"
    assert found["framework_share"].value == pytest.approx(0.05) and found["framework_share"].verdict == "healthy"


def test_warnings_alone_exit_0() -> None:
    report = analyse(Observations("t", chips=(ChipStats("", "0", "0", "0", 0.7),)), TABLE)
    assert (report.verdict, report.exit_code) == ("warning", 0)
    assert worst([None, "healthy", "warning"]) == "warning" and worst([]) is None


# --- capacity ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds,step", [(30 * 86400, 3600), (7 * 86400, 900), (86400, 120), (3600, 60), (365 * 86400, 86400)])
def test_choose_step(seconds: float, step: float) -> None:
    assert choose_step(seconds) == step


def test_linear_fit_and_forecast() -> None:
    points = [(d * 86400.0, 0.2 + 0.01 * d) for d in range(10)]
    slope, intercept = linear_fit(points) or (0, 0)
    assert slope * 86400 == pytest.approx(0.01) and intercept == pytest.approx(0.2)
    f = forecast("x", "ratio", points, end=9 * 86400.0, horizon_days=30, limit=0.5)
    assert f is not None and f.days_to_limit == pytest.approx(21)
    assert forecast("x", "ratio", points[:2], 0, 30) is None  # too few days
    flat = forecast("x", "ratio", [(d * 86400.0, 0.3) for d in range(5)], 4 * 86400.0, 30, limit=0.5)
    assert flat is not None and flat.days_to_limit is None
    assert linear_fit([(1.0, 2.0), (1.0, 3.0)]) is None


def test_daily_groups_by_whole_days() -> None:
    points = [(h * 3600.0, float(h)) for h in range(48)]
    assert daily(points, 0.0) == ((43200.0, 11.5), (129600.0, 35.5))
    assert daily(points, 0.0, "max")[0] == (43200.0, 23.0)


def test_capacity_without_allocation_data_counts_busy_chips() -> None:
    t = [3600.0 * i for i in range(1, 25)]
    chips = (ChipHistory("a", "0", "0", "0", tuple((x, 0.5) for x in t)), ChipHistory("a", "1", "0", "1", tuple((x, 0.0) for x in t)))
    data = CapacityInput(
        "t", t[0], t[-1], 3600.0, chips, (NodeHbm("a", tuple((x, 10.0) for x in t), tuple((x, 40.0) for x in t)),), in_use_known=False
    )
    report = analyse_capacity(data, TABLE)
    assert report.totals["idle_chip_hours"] == 24 and report.totals["mean_utilization_in_use"] == 0.5
    assert report.nodes[0].hbm_peak_ratio == 0.25 and report.nodes[0].hbm_min_headroom_bytes == 30.0
    assert report.verdict == "abnormal" and report.namespaces == ()


def test_capacity_counts_the_observed_seconds_of_each_step() -> None:
    from exporter.diagnostics.capacity_reader import observed_seconds

    t = [3600.0 * i for i in range(1, 5)]
    # a chip scraped from 20 minutes into the first step to 10 minutes into the last
    first, last = {t[0]: t[0] - 2400.0}, {t[-1]: t[-1] - 3000.0, t[1]: t[1], t[2]: t[2]}
    seconds = observed_seconds(tuple((x, 0.5) for x in t), first, last, 3600.0)
    assert seconds == ((t[0], 2400.0), (t[1], 3600.0), (t[2], 3600.0), (t[3], 600.0))
    # samples in the steps just outside the window: the chip goes on, whole steps
    outside = {t[0] - 3600.0, t[-1] + 3600.0}
    assert observed_seconds(tuple((x, 0.5) for x in t), first, last, 3600.0, outside) == tuple((x, 3600.0) for x in t)
    new = ChipHistory("a", "1", "0", "1", tuple((x, 0.0) for x in t), observed=seconds)
    old = ChipHistory("a", "0", "0", "0", tuple((x, 0.5) for x in t))  # no timestamps: whole steps
    report = analyse_capacity(CapacityInput("t", t[0], t[-1], 3600.0, (old, new), in_use_known=False), TABLE)
    hours = (40 + 60 + 60 + 10) / 60
    assert report.totals["chip_hours"] == pytest.approx(4 + hours) and report.totals["idle_chip_hours"] == pytest.approx(hours)
    assert report.totals["unused_chip_hours"] == pytest.approx(2 + hours)


# --- parsing helpers ----------------------------------------------------------------------------------------


def test_durations_selectors_times() -> None:
    assert parse_duration("1h30m") == 5400 and parse_duration("30d") == 30 * 86400
    for bad in ("", "1x", "h", "0s", "1h 30m"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_selector('{instance="a:1"}') == 'instance="a:1"'
    assert parse_selector('job="x",') == 'job="x"'
    assert parse_selector(None) == ""
    with pytest.raises(ValueError):
        parse_selector("{instance")
    assert selector("m", 'a="1"', 'phase=~"x"') == 'm{phase=~"x", a="1"}' and selector("m", "") == "m"
    assert parse_time("1700000000") == 1700000000
    assert parse_time("2024-01-01T00:00:00Z") == 1704067200
    with pytest.raises(ValueError):
        parse_time("yesterday")


# --- renderers -------------------------------------------------------------------------------------------------


def _report() -> Report:
    chips = (ChipStats("n:1", "0", "0", "0", 0.4, 0.3, 0.5, 0.05, 10),)
    return analyse(Observations("Prometheus x", "1h", chips=chips), TABLE)


def test_text_plain_and_coloured() -> None:
    plain = render_text(_report(), TABLE)
    assert "\x1b" not in plain and "verdict: ABNORMAL" in plain and "n:1 NPU 0 chip 0 (device 0)" in plain
    assert "likely causes: data pipeline stalls; uneven task scheduling" in plain
    coloured = render_text(_report(), TABLE, colour=True)
    assert "\x1b[31;1m" in coloured


def test_json_and_markdown_shapes() -> None:
    doc = json.loads(render_json(_report(), TABLE))
    assert doc["verdict"] == "abnormal" and doc["counts"] == {"healthy": 1, "warning": 0, "abnormal": 1}
    assert doc["levels"]["macro"][0]["indicator"] == "device_utilization"
    assert doc["advice"][0]["levers"][0].startswith("pipeline:")
    md = render_markdown(_report(), TABLE)
    assert md.startswith("# cann-exporter diagnose") and "## Macro: is the task stream continuous?" in md


def test_values() -> None:
    assert format_value(0.1234, "ratio") == "12.3%" and format_value(None, "ratio") == "n/a"
    assert format_value(0.25, "seconds") == "250 ms" and format_value(3600, "seconds") == "60.0 min"
    assert format_value(121.6, "per_second") == "121.6/s"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_colour("auto", _Tty()) and not use_colour("auto", io.StringIO())
    assert use_colour("always", io.StringIO()) and not use_colour("never", _Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour("auto", _Tty())


def test_many_edge_steps_read_sample_times_with_one_coarser_range_query_each() -> None:
    from exporter.diagnostics.capacity_reader import MAX_EDGE_STEPS, _edges
    from exporter.diagnostics.promapi import Series

    labels = {"instance": "a", "npu": "0", "chip": "0", "device": "0"}
    points = tuple((3600.0 * i, 0.5) for i in range(1, 4 * MAX_EDGE_STEPS, 2))  # every other hour: all edges
    calls: list[tuple[str, str]] = []

    class Client:
        def instant(self, query: str, at: float) -> list:
            calls.append(("instant", query))
            return []

        def range(self, query: str, start: float, end: float, step: float) -> list:
            calls.append(("range", query))
            stamp = (lambda t: t - 1800.0) if query.startswith("min") else (lambda t: t - 600.0)
            return [Series(labels, tuple((t, stamp(t)) for t, _ in points))]

    observed = _edges(Client(), "npu_aicore_utilization_ratio", [Series(labels, points)], points[0][0], points[-1][0], 3600.0, None)
    assert [kind for kind, _ in calls] == ["instant", "instant", "range", "range"]
    assert "[3600s:300s]" in calls[2][1]
    assert observed[("a", "0", "0", "0")] == tuple((t, 1200.0) for t, _ in points)


def test_a_chip_scraped_by_two_jobs_has_its_namespace_once() -> None:
    """The hourly namespace records are read as they are (no grouping): the same chip under two
    scrape jobs gives two series, and its namespace counts once per hour."""
    from exporter.diagnostics.capacity_reader import read_capacity
    from exporter.diagnostics.promapi import PrometheusClient, Series
    from exporter.thresholds.records import REPORT_NAMESPACE, REPORT_OBSERVED, REPORT_UTIL

    chip = {"instance": "a:9435", "npu": "0", "chip": "0", "device": "0"}
    hours = tuple(3600.0 * i for i in range(1, 4))

    class Client(PrometheusClient):
        def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
            if query.startswith(REPORT_UTIL) and REPORT_OBSERVED in query:
                return [Series({**chip, "job": "cann-exporter"}, tuple((t, 0.5) for t in hours))]
            if query.startswith(REPORT_NAMESPACE):
                return [Series({**chip, "job": job, "namespace": "train"}, tuple((t, 1.0) for t in hours)) for job in ("a", "b")]
            return []

        def instant(self, query: str, at: float) -> list:
            return []

    data = read_capacity(Client("http://127.0.0.1:1"), hours[0], hours[-1], 3600.0, "", recorded=True, nodes={"a:9435": 1})
    assert [c.namespace for c in data.chips] == [tuple((t, "train") for t in hours)]


def test_owners_are_read_from_the_records_once_per_chip_and_hour() -> None:
    """The hourly owner records likewise: a chip under two scrape jobs counts its owner once per hour."""
    from exporter.diagnostics.capacity_reader import read_capacity
    from exporter.diagnostics.promapi import PrometheusClient, Series
    from exporter.thresholds.records import REPORT_OBSERVED, REPORT_OWNER, REPORT_UTIL

    chip = {"instance": "a:9435", "npu": "0", "chip": "0", "device": "0"}
    hours = tuple(3600.0 * i for i in range(1, 4))
    owner = {"runtime": "slurm", "owner": "slurm job 4242 (alice)"}

    class Client(PrometheusClient):
        def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
            if query.startswith(REPORT_UTIL) and REPORT_OBSERVED in query:
                return [Series({**chip, "job": "cann-exporter"}, tuple((t, 0.5) for t in hours))]
            if query.startswith(REPORT_OWNER):
                return [Series({**chip, "job": job, **owner}, tuple((t, 1.0) for t in hours[1:])) for job in ("a", "b")]
            return []

        def instant(self, query: str, at: float) -> list:
            return []

    data = read_capacity(Client("http://127.0.0.1:1"), hours[0], hours[-1], 3600.0, "", recorded=True, nodes={"a:9435": 1})
    assert [c.owners for c in data.chips] == [tuple((t, "slurm", "slurm job 4242 (alice)") for t in hours[1:])]
    assert data.owners_known and not any("npu_chip_owner_info" in n for n in data.notes)


def test_owner_chip_hours_shared_chips_and_allocated_but_idle() -> None:
    """Per owner: its chip-steps' hours (observed seconds only), a chip held by two owners counting
    for both, allocated but idle where held below 1% and not paging; chips without an owner series
    count for none; most chip-hours first."""
    t = tuple(3600.0 * i for i in range(1, 5))
    pod, box = ("kubernetes", "train/bert-0"), ("docker", "llm-serve")
    chips = (
        # held by the pod throughout, 0% in the first two hours; its first hour observed half
        ChipHistory(
            "n:9435",
            "0",
            "0",
            "0",
            tuple(zip(t, (0.0, 0.0, 0.9, 0.9), strict=True)),
            frozenset(t),
            observed=((t[0], 1800.0), *((x, 3600.0) for x in t[1:])),
            owners=tuple((x, *pod) for x in t),
        ),
        # the pod and the container share it in hours 3 and 4 (0.5%: idle), paging in hour 4
        ChipHistory(
            "n:9435",
            "1",
            "0",
            "1",
            tuple((x, 0.005) for x in t),
            frozenset(t),
            unhealthy=frozenset(t[3:]),
            owners=tuple(sorted([(x, *pod) for x in t[2:]] + [(x, *box) for x in t[2:]])),
        ),
        ChipHistory("n:9435", "2", "0", "2", tuple((x, 0.0) for x in t)),  # no owner series: no row
    )
    report = analyse_capacity(CapacityInput("t", t[0], t[-1], 3600.0, chips, owners_known=True), TABLE)
    rows = {(o.runtime, o.owner): o for o in report.owners}
    assert list(rows) == [pod, box]
    held = rows[pod]
    assert (held.chips, held.chip_hours, held.idle_chip_hours) == (2, 3.5 + 2, 1.5 + 1)  # hour 4 of chip 1 paged: not idle
    assert held.mean_utilization == pytest.approx((0.9 * 2 + 0.005 * 2) / 6) and held.below_share == pytest.approx(4 / 6)
    assert (rows[box].chips, rows[box].chip_hours, rows[box].idle_chip_hours, rows[box].idle_share) == (1, 2.0, 1.0, 0.5)
    assert rows[box].verdict == "abnormal" and rows[box].name == "docker · llm-serve"
    assert "owners" not in report.empty
    assert "Chip-hours per owner: kubernetes · train/bert-0 (5.50), docker · llm-serve (2.00)." in report.findings
    assert (
        "Allocated but idle (held, AI Cores below 1%), chip-hours: kubernetes · train/bert-0 (2.50 of 5.50, 45.5%), "
        "docker · llm-serve (1.00 of 2.00, 50.0%)."
    ) in report.findings


# --- the report's numbers and chart styles ---------------------------------------------------------------


@pytest.mark.parametrize(
    "seconds,text",
    [
        (0, "0s"),
        (59.6, "1m"),
        (60, "1m"),
        (450, "7m30s"),
        (3600, "1h"),
        (5400, "1h30m"),
        (90061, "1d1h"),
        (30 * 86400, "30d"),
        (3599.6, "1h"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "hours,text",
    [(0, "0"), (0.4855, "0.49"), (0.0123, "0.012"), (0.0004, "<0.001"), (3.214, "3.21"), (56.78, "56.8"), (1440.4, "1,440"), (None, "n/a")],
)
def test_chip_hours_keep_their_precision(hours: float | None, text: str) -> None:
    assert hours_text(hours) == text


def test_small_shares_do_not_read_as_zero() -> None:
    assert (pct_text(0.0), pct_text(0.0002), pct_text(0.4), pct_text(None)) == ("0.0%", "<0.1%", "40.0%", "n/a")


def test_chart_series_are_distinguishable() -> None:
    styles = [tuple(sorted(series_style(i).items())) for i in range(len(COLOURS) * len(DASHES))]
    assert len(set(styles)) == len(styles) >= MAX_LINES
    series = {f"node-{i:02}": ((0.0, i / 100),) for i in range(MAX_LINES + 5)}
    assert list(lowest(series)) == [f"node-{i:02}" for i in range(MAX_LINES)]
    assert lowest({"b": ((0.0, 1.0),), "a": ((0.0, 0.5),)}) == {"b": ((0.0, 1.0),), "a": ((0.0, 0.5),)}


def test_chips_below_the_bound_are_named_with_their_average() -> None:
    t = [60.0 * i for i in range(1, 11)]
    chips = (
        ChipHistory("n:9435", "0", "0", "0", tuple((x, 0.9) for x in t), frozenset(t)),
        ChipHistory("n:9435", "1", "0", "1", tuple((x, 0.3) for x in t), frozenset(t)),
        ChipHistory("n:9435", "2", "0", "2", tuple((x, 0.0) for x in t)),
    )  # idle: not judged
    report = analyse_capacity(CapacityInput("t", t[0], t[-1], 60.0, chips), TABLE)
    assert [(c.subject, c.mean_utilization) for c in report.chips_below] == [("device 1 (NPU 1, chip 0) on n:9435", 0.3)]
    assert "Chips in use averaging below 60%: device 1 (NPU 1, chip 0) on n:9435 (30.0%)." in report.findings
    assert report.findings[0].startswith("3 chips on 1 node;")
    assert set(report.empty) == {"utilization_namespaces", "owners", "hbm_headroom", "forecast"}


def test_chart_lines_break_at_missing_steps() -> None:
    from exporter.diagnostics.charts import gapped

    points = [(0.0, 0.5), (60.0, 0.5), (420.0, 0.7), (480.0, 0.7)]  # five steps missing
    drawn = gapped(points, 60.0)
    assert [t for t, _ in drawn] == [0.0, 60.0, 120.0, 420.0, 480.0] and math.isnan(drawn[2][1])
    assert gapped(points[:2], 60.0) == points[:2]  # nothing missing: unchanged
