"""The report's analysis scales with chips and steps, not with their product: a month of hourly
points is reduced by numpy, and the Python lines run in the analysis's modules (counted with a
line tracer, a measure of work that load on the machine does not change) stay a small fraction
of the points."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from exporter.diagnostics import capacity, capacity_grid, capacity_owners, capacity_text, forecast
from exporter.diagnostics.capacity import CapacityInput, ChipHistory, NodeHbm, analyse_capacity
from exporter.thresholds.table import load_thresholds

TABLE = load_thresholds()
HOUR = 3600.0
ANALYSIS = {Path(m.__file__ or "").resolve() for m in (capacity, capacity_grid, capacity_owners, capacity_text, forecast)}


@contextmanager
def lines_run() -> Iterator[list[int]]:
    """Counts the lines executed in the analysis's modules."""
    count = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if Path(frame.f_code.co_filename).resolve() in ANALYSIS else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield count
    finally:
        sys.settrace(before)


def fleet(nodes: int, hours: int, chips: int = 8) -> CapacityInput:
    """``nodes`` x ``chips`` chips with a point every hour, busy in a pattern, namespaces, HBM,
    and owners: a Slurm job per node and week holding every chip of the node."""
    times = [1_700_000_000.0 - 1_700_000_000.0 % HOUR + i * HOUR for i in range(hours)]
    histories, hbm = [], []
    for node in range(nodes):
        instance = f"node-{node:03d}:9435"
        for chip in range(chips):
            util = tuple((t, ((node + chip + i) % 10) / 10) for i, t in enumerate(times))
            used = frozenset(t for t, v in util if v > 0.1)
            spaces = tuple((t, f"team-{node % 4}") for t in sorted(used))
            seconds = tuple((t, HOUR if i else HOUR / 2) for i, t in enumerate(times))
            owners = tuple((t, "slurm", f"slurm job {4000 + 10 * node + i // 168} (alice)") for i, t in enumerate(times))
            histories.append(ChipHistory(instance, str(chip), "0", str(chip), util, used, spaces, seconds, owners=owners))
        hbm.append(NodeHbm(instance, tuple((t, 1e10 * (1 + i / hours)) for i, t in enumerate(times)), tuple((t, 5e11) for t in times)))
    return CapacityInput("t", times[0], times[-1], HOUR, tuple(histories), tuple(hbm), True, True)


def test_a_month_of_a_fleet_is_analysed_without_a_python_loop_over_its_points() -> None:
    month, day = fleet(20, 720), fleet(20, 24)
    with lines_run() as month_lines:
        report = analyse_capacity(month, TABLE)
    with lines_run() as day_lines:
        analyse_capacity(day, TABLE)
    points = 20 * 8 * 720
    assert report.totals["chip_hours"] == 20 * 8 * (720 - 0.5)  # the whole month was analysed
    assert len(report.owners) == 20 * 5 and sum(o.chip_hours for o in report.owners) == report.totals["chip_hours"]
    assert len(report.distribution) == 20 * 8 * 720 * 8 // 10  # every point in use (8 of each 10 values > 0.1)
    assert month_lines[0] < points / 5, (month_lines[0], points)  # the per-point analysis ran 52 per point
    # each hour more costs a few lines (daily forecasts), not lines per chip (160 chips; the per-point analysis: 8,250)
    per_hour = (month_lines[0] - day_lines[0]) / (720 - 24)
    assert per_hour < 20, per_hour


def test_more_chips_add_lines_per_chip_not_per_point() -> None:
    with lines_run() as small:
        analyse_capacity(fleet(5, 720), TABLE)
    with lines_run() as large:
        analyse_capacity(fleet(20, 720), TABLE)
    per_chip = (large[0] - small[0]) / (15 * 8)
    assert per_chip < 100, per_chip  # 720 points per chip; the per-point analysis ran about 37,000 lines per chip
