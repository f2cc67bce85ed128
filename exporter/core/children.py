"""How asyncio learns that a child exited: through a pidfd the event loop watches.

Before Python 3.12 asyncio waits for every child in a thread of its own, started with the child
(ThreadedChildWatcher); starting it blocks the event loop until the new thread runs, and while
the machine is busy with the calls themselves that took 2-14 ms of a spawn that costs well
under one (measured: 80 spawns beside three busy processes on two cores, about half of them
held the loop over 2 ms; with a pidfd a tenth to a quarter). 3.12 watches a pidfd of each
child from the loop that started it; this is that watcher for 3.10 and 3.11 (whose own
PidfdChildWatcher is bound to one loop, attached in the main thread, so a loop in another thread
or a later loop in tests cannot use it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the watcher's signature, as typeshed declares it
    from typing_extensions import TypeVarTuple, Unpack

    _Ts = TypeVarTuple("_Ts")

log = logging.getLogger("exporter")


def use_pidfds() -> bool:
    """Have asyncio watch children through pidfds; False where it cannot (no pidfd_open, a kernel
    before 5.3, a seccomp filter refusing it): asyncio's own watcher stays."""
    if sys.version_info >= (3, 12):
        return True  # asyncio's default already
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if not isinstance(asyncio.get_child_watcher(), PidfdWatcher):
            asyncio.set_child_watcher(PidfdWatcher())
    return True


if sys.version_info < (3, 12):

    class PidfdWatcher(asyncio.AbstractChildWatcher):
        """A child's exit reported by the loop that started it, when its pidfd turns readable."""

        def __init__(self) -> None:
            self._children: dict[int, tuple[asyncio.AbstractEventLoop, int]] = {}  # pid -> (loop, pidfd)

        def __enter__(self) -> PidfdWatcher:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def is_active(self) -> bool:
            return True  # any running loop will do: no loop to attach

        def close(self) -> None:
            return None

        def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
            return None

        def add_child_handler(self, pid: int, callback: Callable[[int, int, Unpack[_Ts]], object], *args: Unpack[_Ts]) -> None:
            loop = asyncio.get_running_loop()
            pidfd = os.pidfd_open(pid)
            self._children[pid] = (loop, pidfd)
            loop.add_reader(pidfd, self._exited, pid, callback, args)

        def remove_child_handler(self, pid: int) -> bool:
            watched = self._children.pop(pid, None)
            if watched is None:
                return False
            loop, pidfd = watched
            loop.remove_reader(pidfd)
            os.close(pidfd)
            return True

        def _exited(self, pid: int, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
            if not self.remove_child_handler(pid):
                return
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped by someone else: its status is lost
                log.warning("a child's exit status was read elsewhere", extra={"pid": pid})
                returncode = 255
            else:
                returncode = os.waitstatus_to_exitcode(status)
            callback(pid, returncode, *args)
