"""A real Prometheus holding 31 days of generated history (tests/diagnose/history.py): the
history is built once per test session (OpenMetrics text -> `promtool tsdb
create-blocks-from openmetrics`), and `prometheus` serves it on 127.0.0.1 while this
package's tests run. Plus helpers that run the two commands in-process.

Only 127.0.0.1; every wait is a bounded poll; the Prometheus started here is stopped here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_report
from tests.support.history import openmetrics
from tests.support.ports import free_port
from tests.support.prometheus import Prometheus, wait_ready
from tests.support.tools import tool


@pytest.fixture(scope="session")
def history_blocks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The TSDB blocks of the whole history, built once per test session: (directory, now)."""
    promtool = tool("promtool")
    root = tmp_path_factory.mktemp("prometheus-history")
    # 7 s past a minute, in the past: no sample ever falls on a report step (whole hours), since
    # Prometheus 2.x ranges include both ends and a sample on the edge would count twice.
    now = int(time.time()) // 60 * 60 - 53
    source = root / "history.om"
    with source.open("w") as handle:
        for line in openmetrics(now):
            handle.write(line + "\n")
    data = root / "data"
    # One block for the whole history (the default is one per 2h, hundreds of them).
    built = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1000h", "-q",
                            str(source), str(data)], check=False, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    source.unlink()
    return data, now


@pytest.fixture(scope="package")
def prometheus(history_blocks: tuple[Path, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Prometheus on those blocks while this package's tests run (stopped when they are done,
    so later tests that count the test process's children see none of it)."""
    binary = tool("prometheus")
    data, now = history_blocks
    root = tmp_path_factory.mktemp("prometheus")
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    port = free_port()
    log = root / "prometheus.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [binary, f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
             f"--config.file={config}", "--storage.tsdb.retention.time=60d"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc, log)
        yield Prometheus(url, now)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture(scope="package")
def capacity_report(prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 30-day report, written once for the report tests."""
    out = tmp_path_factory.mktemp("report")
    result = run_report("--prometheus", prometheus.url, "--range", "30d", "--end", str(prometheus.now), "--out", str(out))
    assert result.code == 0, result.err
    assert result.out.strip() == str(out / "index.html")
    return out
