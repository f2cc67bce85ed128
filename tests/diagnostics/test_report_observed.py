"""`cann-exporter report` counts observed chip-hours only, on a real Prometheus holding a short
history: two chips with 7 minutes of data (day one), a chip added 2 hours ago beside one
scraped for 3 days, and a chip with a 1-hour scrape gap. Scraped every 30 s; the history ends
53 s before a whole hour, the end of the report's window."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_report
from tests.support.prometheus import Prometheus, build_blocks, serving_blocks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
SCRAPE = 30
HOUR = 3600


def _series(instance: str, npu: int, times: Iterator[int]) -> Iterator[str]:
    labels = f'{{instance="{instance}",job="cann-exporter",npu="{npu}",chip="0",device="{npu}"}}'
    for t in times:
        yield f"npu_aicore_utilization_ratio{labels} 0.5 {t}"


def history(now: int) -> Iterator[str]:
    yield "# TYPE npu_aicore_utilization_ratio gauge"
    for npu in (0, 1):  # day one: 7 minutes
        yield from _series("day-one:9435", npu, iter(range(now - 7 * 60, now + 1, SCRAPE)))
    yield from _series("added:9435", 0, iter(range(now - 3 * 24 * HOUR, now + 1, SCRAPE)))
    yield from _series("added:9435", 1, iter(range(now - 2 * HOUR, now + 1, SCRAPE)))  # added 2 hours ago
    gap = [*range(now - 6 * HOUR, now - 3 * HOUR + 1, SCRAPE), *range(now - 2 * HOUR, now + 1, SCRAPE)]
    yield from _series("gap:9435", 0, iter(gap))  # no samples for 1 hour
    yield "# EOF"


@pytest.fixture(scope="module")
def short_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    root = tmp_path_factory.mktemp("short-history")
    end = int(time.time()) // HOUR * HOUR - HOUR  # a whole hour in the past: the report's window end
    with serving_blocks(build_blocks(history(end - 53), root), root, end) as served:
        yield served


def chip_hours(prometheus: Prometheus, out: Path, window: str) -> dict[str, dict]:
    result = run_report("--prometheus", prometheus.url, "--range", window, "--end", str(prometheus.now), "--out", str(out))
    assert result.code == 0, result.err
    doc = json.loads((out / "capacity.json").read_text())
    return {n["instance"]: n for n in doc["nodes"]} | {"": doc["totals"]}


# The first sample of a run is found to within a minute (never early), the last exactly.
MINUTE = 1 / 60


@pytest.mark.parametrize("window", ["1d", "30d"])  # 2-minute steps; 30d: cut to the 3 days held, 10-minute steps
def test_day_one_and_a_new_chip_count_the_time_they_were_scraped(short_history: Prometheus, tmp_path: Path, window: str) -> None:
    nodes = chip_hours(short_history, tmp_path, window)
    # 2 chips x 7 minutes (not 2 x 24 h, nor 2 x one 1-hour step)
    assert 2 * 7 * MINUTE - 2 * MINUTE <= nodes["day-one:9435"]["chip_hours"] <= 2 * 7 * MINUTE
    assert nodes["day-one:9435"]["idle_chip_hours"] == 0  # busy at 50% (no process series: in use from 1%)
    assert nodes["day-one:9435"]["unused_chip_hours"] == pytest.approx(nodes["day-one:9435"]["chip_hours"] / 2)
    # 3 days of chip 0 in the window (1 day, or 3 of the 30), plus the 2 hours of chip 1
    whole = 24 if window == "1d" else 72
    added = nodes["added:9435"]["chip_hours"]
    assert whole + 2 - 2 * MINUTE - 53 / HOUR <= added <= whole + 2


def test_a_scrape_gap_longer_than_the_step_does_not_count(short_history: Prometheus, tmp_path: Path) -> None:
    nodes = chip_hours(short_history, tmp_path, "1d")
    # 3 h + 2 h of samples; the hour between them is not counted
    assert 5 - 2 * MINUTE <= nodes["gap:9435"]["chip_hours"] <= 5
