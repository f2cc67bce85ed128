"""Real `cann-exporter serve` processes on the simulator, faults injected through
CANN_SIM_FAULT_FILE (the helpers of tests/test_serve_e2e.py, shared)."""

from __future__ import annotations

import psutil

from tests.procs import descendants
from tests.test_serve_e2e import Exporter, start  # noqa: F401 (start: the same fixture, for these tests)


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
