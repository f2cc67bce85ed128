"""A real Prometheus the tests start on 127.0.0.1 on generated history: the blocks, the
server, its address, and waiting until it serves."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port
from tests.support.tools import tool


@dataclass(frozen=True)
class Prometheus:
    url: str
    now: int  # the history ends here (unix seconds, 7 s past a whole minute)


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


def build_blocks(lines: Iterable[str], root: Path) -> Path:
    """TSDB blocks of OpenMetrics ``lines`` (`promtool tsdb create-blocks-from openmetrics`),
    one block for the whole history (the default is one per 2h, hundreds of them)."""
    source, data = root / "history.om", root / "data"
    with source.open("w") as handle:
        for line in lines:
            handle.write(line + "\n")
    built = subprocess.run(
        [tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1000h", "-q", str(source), str(data)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    source.unlink()
    return data


@contextmanager
def running(config: Path, data: Path, root: Path) -> Iterator[str]:
    """Prometheus with ``config`` and its TSDB in ``data`` on 127.0.0.1 until the block ends
    (stopped, with its group): its URL."""
    port, log = free_port(), root / "prometheus.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--config.file={config}",
                "--storage.tsdb.retention.time=60d",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc, log)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@contextmanager
def serving_blocks(data: Path, root: Path, now: int) -> Iterator[Prometheus]:
    """Prometheus on the blocks in ``data`` until the block ends (stopped, with its group)."""
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    with running(config, data, root) as url:
        yield Prometheus(url, now)
