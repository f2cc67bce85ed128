"""Accepting connections without a log storm when descriptors run out.

asyncio's own accept loop, on EMFILE/ENFILE, logs a traceback for every failed accept()
(up to the backlog's length per wake-up) and schedules a retry for each of them, which
multiply: half a million lines in 40 s under 1,030 idle clients. Here one :class:`Acceptor`
per listening socket stops accepting for :data:`ACCEPT_BACKOFF` after a failure, so pending
clients wait in the kernel's backlog; :class:`AcceptErrors` counts every failure by reason
and logs once when accepting starts failing and once when it recovers.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

log = logging.getLogger("exporter.web")

ACCEPT_BACKOFF = 0.25      # seconds without accept() after a failure
ACCEPT_BATCH = 64          # accept() calls per wake-up, so one busy listener cannot hog the loop
RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ASYNCIO_ACCEPT_MESSAGE = "socket.accept() out of system resource"


def reason(exc: OSError) -> str:
    """A label-safe reason: the errno's name in lower case (emfile, enfile, ...)."""
    name = errno.errorcode.get(exc.errno or 0)
    return name.lower() if name else "other"


class AcceptErrors:
    """Failed accept() calls by reason, logged once per change between failing and recovered."""

    def __init__(self) -> None:
        self.counts = {reason(OSError(number, "")): 0 for number in RESOURCE_ERRNOS}
        self.failing = False
        self._since_failing = 0

    def failed(self, exc: OSError) -> None:
        key = reason(exc)
        self.counts[key] = self.counts.get(key, 0) + 1
        self._since_failing += 1
        if not self.failing:
            self.failing = True
            log.error("cannot accept connections; pausing accept and retrying",
                      extra={"reason": key, "error": str(exc), "retry_seconds": ACCEPT_BACKOFF})

    def succeeded(self) -> None:
        if self.failing:
            self.failing = False
            log.info("accepting connections again", extra={"failed_accepts": self._since_failing})
            self._since_failing = 0

    def loop_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The event loop's exception handler: asyncio's own accept failures (any server not
        behind an Acceptor) are counted here instead of logged with a traceback each."""
        exc = context.get("exception")
        ours = context.get("message") == ASYNCIO_ACCEPT_MESSAGE or ("socket" in context and getattr(exc, "errno", None) in RESOURCE_ERRNOS)
        if isinstance(exc, OSError) and ours:
            self.failed(exc)
            return
        loop.default_exception_handler(context)


class Acceptor:
    """Accepts on one listening socket and hands each new socket to ``accepted``."""

    def __init__(self, sock: socket.socket, accepted: Callable[[socket.socket], None], errors: AcceptErrors,
                 loop: asyncio.AbstractEventLoop, backoff: float = ACCEPT_BACKOFF) -> None:
        self.sock, self.accepted, self.errors, self.loop, self.backoff = sock, accepted, errors, loop, backoff
        self._retry: asyncio.TimerHandle | None = None
        self._reading = False

    def start(self) -> None:
        self.sock.setblocking(False)
        self._resume()

    def close(self) -> None:
        self._pause()
        if self._retry is not None:
            self._retry.cancel()
        self.sock.close()

    def _resume(self) -> None:
        self._retry = None
        if not self._reading:
            self.loop.add_reader(self.sock.fileno(), self._ready)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.sock.fileno())
            self._reading = False

    def _ready(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:   # the client gave up before we took it
                continue
            except OSError as exc:
                # Out of descriptors or memory, or anything else: retrying at once would spin.
                self.errors.failed(exc)
                self._pause()
                self._retry = self.loop.call_later(self.backoff, self._resume)
                return
            self.errors.succeeded()
            conn.setblocking(False)
            self.accepted(conn)
