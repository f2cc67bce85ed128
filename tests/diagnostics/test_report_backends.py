"""`cann-exporter report` with the default `--range 30d` on 30 minutes of one node, on a real
Prometheus and on a real VictoriaMetrics holding the same samples (written backfilled: the
blocks through promtool, VictoriaMetrics through its import API), as on the day a cluster was
set up. VictoriaMetrics moves a range query's points onto multiples of its step unless told
not to: asked as Prometheus is, a 1h step's points all fell before the data and the report
exited 2 ("no npu_aicore_utilization_ratio series"). Both must report the same minutes, at a
step sized to them, with the same chip-hours and the same chips below 60%.

The node: 8 chips scraped every 30 s with a process on chips 0-6; chips 1 and 4 at 35% and 42%,
the others at 90%; chip 7 idle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_report
from tests.support.ports import free_port
from tests.support.prometheus import build_blocks, serving_blocks
from tests.support.tools import tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
SCRAPE, MINUTES = 30, 30
INSTANCE = "npu-1:9435"
UTIL = {1: 0.35, 4: 0.42, 7: 0.0}
BUSY = 0.90
IN_USE = range(7)
Sample = tuple[str, str, float, int]  # metric, labels, value, unix seconds


def samples(last: int) -> Iterator[Sample]:
    times = range(last - MINUTES * 60, last + 1, SCRAPE)

    def labels(npu: int, **extra: str) -> str:
        pairs = {"instance": INSTANCE, "job": "cann-exporter", "npu": npu, "chip": 0, "device": npu, **extra}
        return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"

    for npu in range(8):
        yield from (("npu_aicore_utilization_ratio", labels(npu), UTIL.get(npu, BUSY), t) for t in times)
    for npu in IN_USE:
        yield from (("npu_process_memory_bytes", labels(npu, pid=str(100 + npu), process="python"), 2.0**30, t) for t in times)


def openmetrics(history: list[Sample]) -> Iterator[str]:
    for metric in dict.fromkeys(m for m, *_ in history):
        yield f"# TYPE {metric} gauge"
        yield from (f"{m}{labels} {value} {t}" for m, labels, value, t in history if m == metric)
    yield "# EOF"


@pytest.fixture(scope="module")
def history() -> tuple[list[Sample], int]:
    """The samples and the instant both reports end at: the last sample a minute before it,
    older than VictoriaMetrics' -search.latencyOffset (30 s), which hides newer ones."""
    end = int(time.time())
    return list(samples(end - 60)), end


@pytest.fixture(scope="module")
def prometheus(history: tuple[list[Sample], int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("prometheus-30m")
    lines, end = history
    with serving_blocks(build_blocks(openmetrics(lines), root), root, end) as served:
        yield served.url


@pytest.fixture(scope="module")
def victoriametrics(history: tuple[list[Sample], int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """VictoriaMetrics with its defaults (only its address, storage and log level set)."""
    root = tmp_path_factory.mktemp("victoriametrics-30m")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (root / "victoria-metrics.log").open("w") as log:
        proc = subprocess.Popen(
            [tool("victoria-metrics"), f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={root / 'data'}", "-loggerLevel=ERROR"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_ok(f"{url}/health", proc, 60)
        body = "\n".join(f"{m}{labels} {value} {t * 1000}" for m, labels, value, t in history[0]).encode()
        with urllib.request.urlopen(urllib.request.Request(f"{url}/api/v1/import/prometheus", data=body, method="POST"), timeout=30):
            pass
        with urllib.request.urlopen(f"{url}/internal/force_flush", timeout=30):
            pass
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


def _wait_ok(url: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert proc.poll() is None, f"exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}: not ready within {seconds:g}s")


def report(url: str, end: int, out: Path) -> dict[str, Any]:
    result = run_report("--prometheus", url, "--end", str(end), "--out", str(out))  # --range: its default, 30d
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads((out / "capacity.json").read_text())
    return doc


def test_the_default_30d_report_covers_the_30_minutes_on_both_backends(
    prometheus: str, victoriametrics: str, history: tuple[list[Sample], int], tmp_path: Path
) -> None:
    _, end = history
    mine, theirs = report(prometheus, end, tmp_path / "prometheus"), report(victoriametrics, end, tmp_path / "victoriametrics")
    for d in (mine, theirs):
        assert d["requested"] == 30 * 86400 and d["step"] == 60
        assert MINUTES * 60 - 60 <= d["covered"] <= MINUTES * 60 + 120, d["covered"]
        assert [c["subject"] for c in d["chips_below"]] == [f"device {i} (NPU {i}, chip 0) on {INSTANCE}" for i in (1, 4)]
        assert 8 * (MINUTES - 2) <= d["totals"]["chip_hours"] * 60 <= 8 * (MINUTES + 1), d["totals"]
    assert (mine["start"], mine["end"], mine["covered"]) == (theirs["start"], theirs["end"], theirs["covered"])
    for key in ("chip_hours", "idle_chip_hours", "unused_chip_hours", "mean_utilization_in_use"):
        assert theirs["totals"][key] == pytest.approx(mine["totals"][key], rel=0.02), key
    below = {c["subject"]: c["mean_utilization"] for c in theirs["chips_below"]}
    assert below == pytest.approx({c["subject"]: c["mean_utilization"] for c in mine["chips_below"]}, abs=0.005)
