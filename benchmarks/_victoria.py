"""VictoriaMetrics beside Prometheus in the fleet benchmark: the Debian single-node binary on
127.0.0.1 with its data in the benchmark's temporary directory (stopped at the end), holding
the same history as the Prometheus, raw and recorded series alike.

A live cluster feeds it with remote_write (deploy/prometheus/victoriametrics.prometheus.yml,
tested for real in tests/deploy/test_deploy_victoriametrics.py). remote_write ships only the
samples Prometheus appends from then on, never backfilled blocks, so the benchmark moves its
month of history over with `vmctl prometheus` (what an operator moving an existing
Prometheus does): vmctl reads the TSDB blocks and imports every series into VictoriaMetrics.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import _common as c

BINARIES = ("victoria-metrics", "vmctl", "script")  # script: vmctl needs a terminal, even with -s


@contextlib.contextmanager
def victoria(work: Path, lookback: int, timeout: float) -> Iterator[tuple[str, c.Process]]:
    """(url, process) of VictoriaMetrics until the block ends. Its cache is off (the timed
    queries repeat) and its lookback is Prometheus' (``lookback`` seconds: the 10-minute
    rollups stay visible between evaluations)."""
    port = c.free_port()
    argv = [
        "victoria-metrics",
        f"-httpListenAddr={c.HOST}:{port}",
        f"-storageDataPath={work / 'victoria-metrics'}",
        "-retentionPeriod=3",
        "-search.disableCache",
        "-search.latencyOffset=0s",
        f"-search.maxStalenessInterval={lookback}s",
        f"-search.maxQueryDuration={int(timeout)}s",
        "-loggerLevel=ERROR",
    ]
    with c.started("victoria-metrics", argv) as proc:
        url = f"http://{c.HOST}:{port}"
        c.wait_until("VictoriaMetrics ready", lambda: _status(f"{url}/health") == 200, 120, every=0.5, procs=[proc])
        yield url, proc


def import_history(url: str, data: Path) -> dict[str, Any]:
    """Every block of the Prometheus TSDB in ``data`` into VictoriaMetrics (vmctl), flushed so
    queries see it: seconds taken, samples and series vmctl reports."""
    start = time.monotonic()
    command = shlex.join(["vmctl", "prometheus", "-s", "--vm-disable-progress-bar", f"--prom-snapshot={data}", f"--vm-addr={url}"])
    done = subprocess.run(["script", "-qefc", command, "/dev/null"], capture_output=True, text=True, timeout=7200, check=False)
    if done.returncode != 0 or "Total time" not in done.stdout:
        raise c.BenchError(f"vmctl prometheus failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    _status(f"{url}/internal/force_flush")
    found = {k: int(v) for k, v in re.findall(r"\b(samples|series): (\d+)", done.stdout)}
    return {"seconds": time.monotonic() - start, "samples": found.get("samples", 0), "series": found.get("series", 0)}


def rss_peak(proc: c.Process) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _status(url: str) -> int:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return int(response.status)
    except OSError:
        return 0
