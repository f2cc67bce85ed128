"""Real `cann-exporter serve` processes on the simulator, faults injected through
CANN_SIM_FAULT_FILE (the helpers of tests/test_serve_e2e.py, shared)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.procs import descendants
from tests.test_serve_e2e import Exporter


@pytest.fixture
def start(tmp_path: Path) -> Iterator:
    started: list[Exporter] = []

    def run(*args: str, env: dict[str, str] | None = None) -> Exporter:
        exporter = Exporter(list(args), tmp_path, env)
        started.append(exporter)
        return exporter

    yield run
    for exporter in started:
        exporter.stop()


def strays(exporter: Exporter) -> list[psutil.Process]:
    """Live processes started under this exporter's fault file that are no longer its
    descendants: hung npu-smi children a process-group kill missed, re-parented away."""
    mine = {exporter.proc.pid} | {p.pid for p in descendants(exporter.proc.pid)}
    out = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in mine:
            continue
        try:
            if proc.environ().get("CANN_SIM_FAULT_FILE") == str(exporter.fault_file) and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out
