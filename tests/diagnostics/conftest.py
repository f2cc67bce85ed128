"""A real Prometheus holding 31 days of generated history (tests/diagnose/history.py): the
history is built once per test session (OpenMetrics text -> `promtool tsdb
create-blocks-from openmetrics`), and `prometheus` serves it on 127.0.0.1 while this
package's tests run. Plus helpers that run the two commands in-process.

Only 127.0.0.1; every wait is a bounded poll; the Prometheus started here is stopped here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_report
from tests.support.history import PRICE_PER_KWH as PRICE
from tests.support.history import openmetrics
from tests.support.prometheus import Prometheus, build_blocks, serving_blocks


@pytest.fixture(scope="session")
def history_blocks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The TSDB blocks of the whole history, built once per test session: (directory, now)."""
    # 7 s past a minute, in the past: no sample ever falls on a report step (whole hours), since
    # Prometheus 2.x ranges include both ends and a sample on the edge would count twice.
    now = int(time.time()) // 60 * 60 - 53
    return build_blocks(openmetrics(now), tmp_path_factory.mktemp("prometheus-history")), now


@pytest.fixture(scope="package")
def prometheus(history_blocks: tuple[Path, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Prometheus on those blocks while this package's tests run (stopped when they are done,
    so later tests that count the test process's children see none of it)."""
    data, now = history_blocks
    with serving_blocks(data, tmp_path_factory.mktemp("prometheus"), now) as served:
        yield served


@pytest.fixture(scope="package")
def capacity_report(prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 30-day report, written once for the report tests (energy priced at PRICE per kWh)."""
    out = tmp_path_factory.mktemp("report")
    result = run_report(
        "--prometheus", prometheus.url, "--range", "30d", "--end", str(prometheus.now), "--out", str(out), "--price-per-kwh", str(PRICE)
    )
    assert result.code == 0, result.err
    assert result.out.strip() == str(out / "index.html")
    return out
