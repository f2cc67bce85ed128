"""Hostile inputs as real files, and commands run in a subprocess with their peak memory watched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs": ``width`` aliases per level, ``width ** levels`` strings expanded
    (the default is 387 million from about 600 bytes)."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def symlink(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    peak_rss: int          # bytes, sampled every 20 ms
    seconds: float


def run_watched(args: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> Ran:
    """``python -m exporter ARGS`` to its end (killed after ``timeout``), sampling its RSS."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "exporter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    watched = psutil.Process(proc.pid)
    peak = 0
    try:
        while proc.poll() is None and time.monotonic() - start < timeout:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=30)
    return Ran(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), peak, time.monotonic() - start)
