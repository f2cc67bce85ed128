"""Process-tree checks that tolerate the race they observe: a child can exit between
being listed and being inspected, and an exited child is a zombie until it is reaped."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from tests.support.serve import Exporter


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Children of `pid` (default: this process), recursively; [] when it is gone."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def cmdline(proc: psutil.Process) -> str:
    """The command line, or "" for a process that has exited meanwhile."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return ""


def status(proc: psutil.Process) -> str | None:
    """psutil's status, or None for a process that is already reaped."""
    try:
        return proc.status()
    except psutil.NoSuchProcess:
        return None


def exited(pid: int) -> bool:
    """True once `pid` is dead: reaped, or a zombie waiting for its parent."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def calls(pid: int | None = None) -> list[psutil.Process]:
    """Descendants: the calls and what they started (nothing else lives beside an exporter)."""
    return descendants(pid)


def running(pid: int | None = None) -> list[psutil.Process]:
    return [p for p in calls(pid) if status(p) not in (None, psutil.STATUS_ZOMBIE)]


def zombies(pid: int | None = None) -> list[psutil.Process]:
    return [p for p in calls(pid) if status(p) == psutil.STATUS_ZOMBIE]


def lingering_zombies(pid: int | None = None, grace: float = 10.0) -> list[psutil.Process]:
    """Zombies still unreaped after `grace` seconds. A child that just exited is a zombie
    for the instant before its parent reaps it; only one that stays is a leak."""
    end = time.monotonic() + grace
    while (found := zombies(pid)) and time.monotonic() < end:
        time.sleep(0.1)
    return found


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
