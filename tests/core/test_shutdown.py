"""exporter.core.shutdown.leave: a child process whose worker thread is stuck reading a FIFO
(no writer: the open blocks for ever) still ends, with its exit code, after the grace."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.support.paths import ROOT

CHILD = textwrap.dedent("""
    import sys, threading
    from exporter.core.shutdown import leave
    fifo, grace, stuck = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "stuck"
    if stuck:
        threading.Thread(target=lambda: open(fifo).read(), name="reader").start()
    else:
        threading.Thread(target=lambda: None, name="quick").start()
    print("leaving", flush=True)
    sys.exit(leave(3, grace))
""")


def _run(tmp_path, stuck: bool) -> subprocess.CompletedProcess[str]:
    fifo = tmp_path / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(fifo), "0.5", "stuck" if stuck else "quick"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )


def test_a_stuck_worker_does_not_keep_the_process(tmp_path):
    done = _run(tmp_path, stuck=True)  # without leave() this would hit the 30 s timeout
    assert done.returncode == 3, done.stderr
    assert "leaving" in done.stdout and "worker threads still busy at exit" in done.stderr


def test_finished_threads_exit_normally(tmp_path):
    done = _run(tmp_path, stuck=False)
    assert done.returncode == 3 and "still busy" not in done.stderr
