"""A real Prometheus the tests start on 127.0.0.1: its address, and waiting until it serves."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Prometheus:
    url: str
    now: int            # the history ends here (unix seconds, 7 s past a whole minute)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"prometheus not ready after {deadline}s:\n{log.read_text(errors='replace')[-3000:]}")
