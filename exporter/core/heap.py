"""The garbage collector's view of a long-running process.

Everything built at start-up (modules, classes, option tables, the assembled sources and
app: about 45,000 tracked objects) lives as long as the process. A full collection walks all
of them, 20-30 ms of CPU with the GIL held, several times a minute when requests churn
objects: each one a stall of the event loop, and of every health probe waiting on it.
Frozen, they are left out of every collection; only what was made since is walked.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable


def freeze_startup() -> int:
    """Collect the start-up garbage, then move every survivor out of the collector's sight
    (still freed by reference counting, never by a cycle walk). Returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Give the memory a burst freed back to the system.

    Buffers of many connections at once (TLS buffers, request bodies) are freed to glibc's
    heap, which keeps them: RSS would stay at the burst's peak for good. A collection of the
    young generations frees what cycles of the burst still held (a full one walks the whole
    heap: too long a stall for the event loop), then malloc_trim returns the free pages.
    """
    gc.collect(1)
    if _TRIM is not None:
        _TRIM(0)


# A burst of this many connections, once down to a quarter, gives its freed buffers back.
TRIM_AFTER_PEAK = 32
TRIM_DELAY = 1.0  # seconds after the burst has closed (once per burst)


class BurstTrim:
    """Calls :func:`release_freed_memory` once a burst of connections has mostly closed."""

    def __init__(self, loop: asyncio.AbstractEventLoop, open_now: Callable[[], int]) -> None:
        self.loop, self.open_now = loop, open_now
        self._peak = 0
        self._pending: asyncio.TimerHandle | None = None

    def changed(self) -> None:
        """A connection opened or closed."""
        now = self.open_now()
        self._peak = max(self._peak, now)
        if self._peak >= TRIM_AFTER_PEAK and now <= self._peak // 4 and self._pending is None:
            self._pending = self.loop.call_later(TRIM_DELAY, self._trim)

    def _trim(self) -> None:
        self._pending, self._peak = None, self.open_now()
        # In a thread: malloc_trim walks the whole heap without the GIL, the loop goes on.
        self.loop.run_in_executor(None, release_freed_memory)
