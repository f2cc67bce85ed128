"""One client connection with deadlines: aiohttp's protocol inside, timers and the cap around it.

aiohttp closes idle keep-alive connections but never times out a request being read: a
client that sends half its headers, or a Content-Length it never delivers, holds the
connection (and its slot) for ever; one that stops reading its response holds the response
in memory for ever. :class:`GuardedConnection` wraps aiohttp's per-connection protocol (the
public asyncio Protocol interface, forwarded as is) and keeps one read deadline for what it
waits on from the client:

- ``header``: a request's headers, from accept (TLS handshake included) or from the first
  byte of a request on a kept-alive connection (``web.header_timeout``);
- ``body``: the rest of the body, from the headers (``web.body_timeout``);
- ``idle``: the next request on a kept-alive connection (``web.idle_timeout``);

and none while a handler runs (handlers never wait on a source). Apart from these, while the
transport's write buffer is above its high-water mark (the client is not reading), a write
deadline runs (``web.write_timeout``); read deadlines that expire meanwhile wait for it. A
deadline that fires aborts the transport: what is buffered is dropped, not flushed to a client
that does not read; while it waits, nothing more is read from that client either.
:class:`ConnectionGuard` admits sockets through the table (limits.py), connects them and
follows each request through a middleware (headers parsed, handler done).

Until a connection sends something other than a plain health probe, its probes are answered
here (probes.py), without aiohttp; from the first other request on, every byte goes to aiohttp.
A plain-text socket holding one whole probe that asks to close is answered at accept, before
the cap and without a connection.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import socket
import ssl
from collections.abc import Awaitable, Callable

from aiohttp import StreamReader, web

from exporter.web.limits import HEALTH_PATHS, ConnectionTable, Pool
from exporter.web.options import WebOptions
from exporter.web.probes import Probes, answer_at_accept, may_be_probe

WRITE_BUFFER_HIGH = 64 * 1024   # bytes buffered for a client before it counts as not reading
HANDSHAKE_SLACK = 1.0           # asyncio's own handshake timeout, a backstop behind the header deadline

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Phase(enum.Enum):
    HEADERS = "header"     # waiting for a request's headers
    BODY = "body"          # waiting for the rest of a request's body
    HANDLING = "handling"  # a handler runs: nothing awaited from the client
    IDLE = "idle"          # kept alive, waiting for the next request


class GuardedConnection(asyncio.Protocol):
    """One connection: aiohttp's protocol (``inner``) and the deadlines of what it waits for."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self.guard = guard
        self.loop = guard.loop
        self.health_only = False
        self.phase = Phase.HEADERS
        self.since = self.loop.time()     # when the current phase began (the loop's monotonic clock)
        self.transport: asyncio.Transport | None = None
        self.inner: asyncio.Protocol | None = None
        self.connecting: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None         # the read deadline of the phase
        self._write_timer: asyncio.TimerHandle | None = None   # runs while the client does not read
        self._body: StreamReader | None = None
        self._in_handler = False
        self._pending = False      # a next request began while the handler ran
        self._closed = False       # lost or closed: nothing may arm a deadline again
        self._paused_reading = False  # reading paused here while the client does not read
        # Probes are answered here until the first other request; bytes of a request not yet
        # whole wait in ``_held`` (at most a probe's head, or one read while the client does
        # not read our answers).
        self._direct = guard.probes is not None
        self._held = b""

    def begin(self) -> None:
        """Admitted: the header deadline runs from now (the TLS handshake counts against it)."""
        self._arm()

    # --- the table's view ----------------------------------------------------------------------
    def waiting_since(self) -> float | None:
        """Since when it waits for a request, its body, or (in a TLS handshake) the client; None
        while a handler runs."""
        return None if self.phase is Phase.HANDLING else self.since

    def evict(self) -> None:
        self._close_now()

    # --- asyncio.Protocol, forwarded to aiohttp's ----------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.inner = self.guard.make_handler()
        self.guard.by_handler[self.inner] = self
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        assert self.inner is not None
        if self._direct:
            data = self._answer_probes(self._held + data)
            if not data:
                return
        self.inner.data_received(data)
        if self.phase is Phase.IDLE:
            self._enter(Phase.HEADERS)
        elif self.phase is Phase.HANDLING:
            self._pending = True
        elif self.phase is Phase.BODY and self._body is not None and self._body.is_eof():
            self._body_done()

    def _answer_probes(self, data: bytes) -> bytes:
        """Answer the whole probes at the start of ``data``; returns what is aiohttp's."""
        assert self.transport is not None and self.guard.probes is not None
        self._held = b""
        if self.phase is Phase.IDLE:
            self._enter(Phase.HEADERS)             # a request begins: the header deadline runs
        answered = False
        while data:
            end = data.find(b"\r\n\r\n")
            answer = self.guard.probes.answer(data[:end]) if end >= 0 else None
            if answer is None:
                if end < 0 and may_be_probe(data):
                    self._held = data              # more of a probe to come
                    break
                self._direct = False               # not a probe: this connection is aiohttp's from here
                if answered:
                    self._enter(Phase.HEADERS)
                return data
            self.transport.write(answer.payload)
            answered, data = True, data[end + 4:]
            if answer.close or self.health_only:   # one probe per health slot
                self.transport.close()
                self.forget()
                return b""
            if self._write_timer is not None:      # the client does not read: the rest waits
                self._held = data
                break
        if answered:
            self._enter(Phase.HEADERS if self._held else Phase.IDLE)
        return b""

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self._write_timer is None and not self._closed:
            self._write_timer = self.loop.call_later(self.guard.options.write_timeout, self._expired, "write")
        # Nor read what it sends meanwhile: aiohttp would parse and queue every pipelined request
        # of a client that does not read (a health-check flood costs its parse and its memory).
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()
            self._paused_reading = True
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self._cancel_write_timer()
        if self.inner is not None:
            self.inner.resume_writing()
        if self._held and self._direct and not self._closed:
            self.data_received(b"")               # the probes that waited for the client to read
        if self._write_timer is None and self._paused_reading and self.transport is not None and not self.transport.is_closing():
            self._paused_reading = False
            self.transport.resume_reading()
        if self._timer is None:    # a read deadline expired while the client was not reading
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.forget()
        if self.inner is not None:
            self.guard.by_handler.pop(self.inner, None)
            self.inner.connection_lost(exc)

    # --- requests, from the middleware ---------------------------------------------------------
    def request_started(self, request: web.Request) -> None:
        self._in_handler, self._pending = True, False
        self._body = request.content
        self._enter(Phase.HANDLING if request.content.is_eof() else Phase.BODY)

    def request_finished(self) -> None:
        self._in_handler = False
        if self.phase is not Phase.BODY:   # an unread body keeps its deadline while aiohttp drains it
            self._enter(Phase.HEADERS if self._pending else Phase.IDLE)

    def _body_done(self) -> None:
        if self._in_handler:
            self._enter(Phase.HANDLING)
        else:
            self._enter(Phase.HEADERS if self._pending else Phase.IDLE)

    # --- deadlines -----------------------------------------------------------------------------
    def _enter(self, phase: Phase) -> None:
        self.phase = phase
        self.since = self.loop.time()
        if phase is not Phase.BODY:
            self._body = None    # the request's stream and what it buffered are no longer ours to keep
        self._cancel_timer()
        self._arm()

    def _arm(self) -> None:
        timeout = self._phase_timeout()
        if timeout is not None and not self._closed:
            self._timer = self.loop.call_later(timeout, self._expired, self.phase.value)

    def _phase_timeout(self) -> float | None:
        options = self.guard.options
        return {Phase.HEADERS: options.header_timeout, Phase.BODY: options.body_timeout,
                Phase.IDLE: options.idle_timeout}.get(self.phase)

    def _expired(self, kind: str) -> None:
        if kind == "write":
            self._write_timer = None
        else:
            self._timer = None
            if self._write_timer is not None:
                return   # not reading what we sent: the write deadline judges, resume_writing re-arms
        self.guard.table.count_timeout(kind)
        self._close_now()

    def _close_now(self) -> None:
        """Close at once, dropping whatever is still buffered for the client."""
        self.forget()
        if self.transport is not None:
            self.transport.abort()
        elif self.connecting is not None:   # still in its TLS handshake
            self.connecting.cancel()

    def forget(self) -> None:
        """Out of the table, its deadlines cancelled; nothing arms one again."""
        self._closed = True
        self._cancel_timer()
        self._cancel_write_timer()
        self.guard.table.remove(self)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None


def _peer_host(sock: socket.socket) -> str | None:
    try:
        return str(sock.getpeername()[0])
    except (OSError, IndexError):   # already reset by the client
        return None


class ConnectionGuard:
    """Admits accepted sockets, connects them as GuardedConnections, follows their requests."""

    def __init__(self, table: ConnectionTable, options: WebOptions, make_handler: Callable[[], asyncio.Protocol],
                 loop: asyncio.AbstractEventLoop, ssl_context: ssl.SSLContext | None = None,
                 refuse: Callable[[str | None], bool] | None = None, probes: Probes | None = None) -> None:
        self.table, self.options, self.make_handler, self.loop = table, options, make_handler, loop
        self.ssl_context = ssl_context
        self.refuse = refuse     # peer address -> close at once (out of failed-login budget)
        self.probes = probes     # health probes answered without aiohttp (None: all through aiohttp)
        self.by_handler: dict[object, GuardedConnection] = {}   # aiohttp's protocol -> its connection

    def accepted(self, sock: socket.socket) -> None:
        """An accepted socket: admitted (and connected), answered at once (a probe), or closed."""
        if self.refuse is not None and self.refuse(_peer_host(sock)):
            self.table.count_rejected("throttled")
            sock.close()
            return
        if self.ssl_context is None and self.probes is not None and answer_at_accept(self.probes, sock):
            return
        conn = GuardedConnection(self)
        pool = self.table.admit(conn)
        if pool is None:
            sock.close()
            return
        conn.health_only = pool is Pool.HEALTH
        conn.begin()
        tls = {} if self.ssl_context is None else {
            "ssl": self.ssl_context, "ssl_handshake_timeout": self.options.header_timeout + HANDSHAKE_SLACK}
        conn.connecting = self.loop.create_task(self.loop.connect_accepted_socket(lambda: conn, sock, **tls))
        conn.connecting.add_done_callback(functools.partial(self._connected, conn, sock))

    @staticmethod
    def _connected(conn: GuardedConnection, sock: socket.socket, task: asyncio.Task) -> None:
        conn.connecting = None
        if task.cancelled() or task.exception() is not None:
            # A failed handshake, or closed by a deadline or an eviction before it finished (maybe
            # before the task ever ran). Any transport that held the socket is closed and no
            # longer watches it, so closing it here is safe, and needed when none was made.
            sock.close()
            conn.forget()

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        """Tells each connection when its request's headers are in and when its handler is done;
        health slots answer /healthz and /readyz only."""

        @web.middleware
        async def follow(request: web.Request, handler: Handler) -> web.StreamResponse:
            conn = self.by_handler.get(request.protocol)
            if conn is None:   # not a connection of ours (an app served some other way)
                return await handler(request)
            if conn.health_only and request.path not in HEALTH_PATHS:
                self.table.count_rejected("health_only")
                refused = web.Response(status=503, text="too many connections; retry later\n", headers={"Retry-After": "1"})
                refused.force_close()
                return refused
            conn.request_started(request)
            try:
                response = await handler(request)
            finally:
                conn.request_finished()
            if conn.health_only:
                response.force_close()   # one probe per health slot: free it at once
            return response

        return follow
