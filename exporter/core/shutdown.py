"""Leaving the process at SIGTERM whatever a worker thread is doing.

Sources run blocking file work (profile scans, the state file) in worker threads. A thread
blocked in a read (a hung network mount, a device) cannot be interrupted, and Python joins
every non-daemon thread, the executor's workers included, before the process ends: one stuck
read would keep a stopped exporter alive for ever. So once the server has stopped, `serve`
gives the remaining threads :data:`THREAD_GRACE` seconds, then leaves without them
(``os._exit``) after flushing its log.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

log = logging.getLogger("exporter")

# At SIGTERM, in-flight requests get REQUEST_GRACE (web/server.py: handlers are quick; a client
# that does not read would otherwise hold the exit for aiohttp's 60 s), then worker threads get
# THREAD_GRACE: the process ends within EXIT_WITHIN, inside systemd's and Kubernetes' stop timeouts.
REQUEST_GRACE = 5.0
THREAD_GRACE = 5.0
EXIT_WITHIN = REQUEST_GRACE + THREAD_GRACE


def leave(code: int, grace: float = THREAD_GRACE) -> int:
    """``code`` once every other non-daemon thread has ended; if some are still running after
    ``grace`` seconds, the process ends here with ``code`` without waiting for them."""
    deadline = time.monotonic() + grace
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in others if t.is_alive()]
    if not stuck:
        return code
    log.warning("worker threads still busy at exit; leaving without them", extra={"threads": ",".join(stuck), "grace_seconds": grace})
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
