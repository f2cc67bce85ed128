"""How the monitors of a process end, whatever ends it.

- ``fork()``: the child's monitors start fresh (no buffer, no thread) until it reports a step;
- interpreter exit (also after Ctrl-C): every monitor flushes, bounded, and sends its final
  message, unless an uncaught exception ended the run: then the steps go without it, and the
  exporter serves the rank as stalled (a crash pages), not finished;
- a framework's end of training: :func:`finish_training`.
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from time import perf_counter as _perf
from typing import Any, Protocol, TypeVar


class Tracked(Protocol):
    created: float  # perf_counter time: a crash before it was not this monitor's

    def newest_event(self) -> float: ...
    def close(self, timeout: float = ..., *, finished: bool = ...) -> None: ...
    def _after_fork_in_child(self) -> None: ...


_MONITORS: weakref.WeakSet[Tracked] = weakref.WeakSet()


def track(monitor: Tracked) -> None:
    _MONITORS.add(monitor)


def _after_fork_in_child() -> None:
    for mon in list(_MONITORS):
        mon._after_fork_in_child()


def _close_all_at_exit() -> None:
    # Bounded: at most ~1 s per monitor even when the exporter is slow or gone.
    for mon in list(_MONITORS):
        mon.close(timeout=1.0, finished=not _crash.ended(mon))


class _Crash:
    """Notes an exception that ends the main thread, so the exit flush sends the steps but no
    final message.

    sys.excepthook also prints errors that C extensions report and then carry on from (a module
    failing to import inside a framework's import, through PyErr_Print): a monitor that recorded
    a step after the hook ran, or was created after it, did not crash."""

    def __init__(self) -> None:
        self.previous = sys.excepthook
        self.at: float | None = None  # perf_counter time of the latest uncaught exception

    def __call__(self, exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not issubclass(exc_type, KeyboardInterrupt):  # Ctrl-C is the user ending the run
            self.at = _perf()
        self.previous(exc_type, exc, tb)

    def ended(self, mon: Tracked) -> bool:
        return self.at is not None and mon.created < self.at and mon.newest_event() < self.at


_crash = _Crash()
sys.excepthook = _crash
os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)


class _Closable(Protocol):
    def flush(self, timeout: float = ...) -> bool: ...
    def close(self, timeout: float = ...) -> None: ...


M = TypeVar("M", bound=_Closable)


def finish_training(monitor: M | None, owned: bool) -> M | None:
    """A framework callback's end of training: close the monitor it created (-> None), only
    flush one the caller handed in, which the caller still uses and closes (-> the monitor)."""
    if monitor is None:
        return None
    if owned:
        monitor.close()
        return None
    monitor.flush()
    return monitor
