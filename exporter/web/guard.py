"""What aiohttp's server lacks, around its per-connection protocol: the accept loop with its
EMFILE backoff, the per-address rate and the connection cap (limits.py), and read and write
deadlines. TLS handshakes go through a gate (tls.py: on the first byte, capped); malformed
requests are answered and logged by the handler (handler.py). Every byte of every request is
parsed by aiohttp.

Deadlines (aiohttp closes idle keep-alive connections, but never times out a request being
read, nor a client that does not read its response). One read deadline runs for what the
connection waits on from its client:

- ``header``: a request's headers, from accept (TLS handshake included) or from the first byte
  of a request on a kept-alive connection (``web.header_timeout``);
- ``body``: the rest of the body, from the headers (``web.body_timeout``);
- ``idle``: the next request on a kept-alive connection (``web.idle_timeout``);

and none while a handler runs. While the transport's write buffer is above its high-water mark
(the client is not reading), a write deadline runs instead (``web.write_timeout``) and nothing
more is read from that client. A deadline that fires aborts the transport: what is buffered
is dropped, not flushed to a client that does not read.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import StreamReader, web
from aiohttp.typedefs import Handler, Middleware

from exporter.core.heap import BurstTrim
from exporter.web.auth import AUTHENTICATED_USER
from exporter.web.fds import accept_error_counts, errno_reason
from exporter.web.handler import FrontHandler, MalformedRequests
from exporter.web.limits import HEALTH_PATHS, AddressRates, ConnectionTable, Pool
from exporter.web.lobby import Lobby
from exporter.web.options import WebOptions
from exporter.web.tls import HandshakeGate

log = logging.getLogger("exporter.web")

WRITE_BUFFER_HIGH = 64 * 1024  # bytes buffered for a client before it counts as not reading
HANDSHAKE_SLACK = 1.0  # asyncio's own handshake timeout, a backstop behind the header deadline
ACCEPT_BACKOFF = 0.25  # seconds without accept() after a failure
ACCEPT_BATCH = 64  # accept() calls per wake-up, so one busy listener cannot hog the loop


class Phase(enum.Enum):
    HEADERS = "header"  # waiting for a request's headers (or, in TLS, its first byte)
    BODY = "body"  # waiting for the rest of a request's body
    HANDLING = "handling"  # a handler runs: nothing awaited from the client
    IDLE = "idle"  # kept alive, waiting for the next request


class Connection(asyncio.Protocol):
    """One connection: aiohttp's protocol (``inner``) and the deadlines of what it waits for."""

    def __init__(self, front: Front, sock: socket.socket, address: str | None) -> None:
        self.front, self.sock, self.address = front, sock, address
        self.loop = front.loop
        self.health_only = False
        self.phase = Phase.HEADERS
        self.since = self.loop.time()  # when the current phase began (the loop's monotonic clock)
        self.transport: asyncio.Transport | None = None
        self.inner: FrontHandler | None = None
        self.connecting: asyncio.Task[Any] | None = None
        self.watching = False  # TLS: waiting for the first byte before the handshake
        self.heard = False  # its client has sent a byte (silent connections make room first)
        self.trusted = False  # a request on it passed basic auth: its idle keep-alive is kept
        self.answered = False  # a request on it was answered: a newcomer that has not spoken never takes its place
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None
        self.gone = False  # lost or closed: nothing may arm a deadline again
        self._in_handler = self._pending = self._paused_reading = False

    # --- the table's view ----------------------------------------------------------------------
    def waiting_since(self) -> float | None:
        if self.phase is Phase.HANDLING or (self.trusted and self.phase is Phase.IDLE):
            return None  # a scraper between its scrapes is not waited on: only idle_timeout closes it
        return self.since

    def silent(self) -> bool:
        """Never sent a byte. Bytes already in its socket count: the loop may not have read
        them yet when a newcomer asks for its slot (peeked once, and only while it has not
        been heard, so a connection that spoke costs nothing here)."""
        if not self.heard and _has_bytes(self.sock):
            self.heard = True
        return not self.heard

    def served(self) -> bool:
        return self.answered

    def evict(self) -> None:
        self._close_now()

    def begin(self) -> None:
        """Admitted: the header deadline runs from now (a TLS handshake counts against it)."""
        self._arm()

    # --- asyncio.Protocol, forwarded to aiohttp's ----------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.inner = self.front.make_handler()
        self.inner.malformed, self.inner.refusing = self.front.malformed, False
        self.front.by_handler[self.inner] = self
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        assert self.inner is not None
        self.heard = True
        self.inner.data_received(data)
        if self.phase is Phase.IDLE:
            self._enter(Phase.HEADERS)
        elif self.phase is Phase.HANDLING:
            self._pending = True
        elif self.phase is Phase.BODY and self._body is not None and self._body.is_eof():
            self._body_done()

    def eof_received(self) -> bool | None:
        if self.inner is not None:
            self.inner.eof_received()
        return None  # close on EOF, as aiohttp's protocol does

    def pause_writing(self) -> None:
        if self._write_timer is None and not self.gone:
            self._write_timer = self.loop.call_later(self.front.options.write_timeout, self._expired, "write")
        # Nor read meanwhile: aiohttp would parse and queue every pipelined request of a client
        # that does not read.
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()
            self._paused_reading = True
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        self._cancel_write_timer()
        if self.inner is not None:
            self.inner.resume_writing()
        if self._paused_reading and self.transport is not None and not self.transport.is_closing():
            self._paused_reading = False
            self.transport.resume_reading()
        if self._timer is None:  # a read deadline expired while the client was not reading
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.forget()
        if self.inner is not None:
            self.front.by_handler.pop(self.inner, None)
            self.inner.connection_lost(exc)

    # --- requests, from the middleware ---------------------------------------------------------
    def request_started(self, request: web.Request) -> None:
        self._in_handler, self._pending = True, False
        self._body = request.content
        self._enter(Phase.HANDLING if request.content.is_eof() else Phase.BODY)

    def request_finished(self) -> None:
        self._in_handler, self.answered = False, True
        if self.phase is not Phase.BODY:  # an unread body keeps its deadline while aiohttp drains it
            self._enter(Phase.HEADERS if self._pending else Phase.IDLE)

    def _body_done(self) -> None:
        self._enter(Phase.HANDLING if self._in_handler else Phase.HEADERS if self._pending else Phase.IDLE)

    # --- deadlines -----------------------------------------------------------------------------
    def _enter(self, phase: Phase) -> None:
        self.phase, self.since = phase, self.loop.time()
        if phase is not Phase.BODY:
            self._body = None
        self._cancel_timer()
        self._arm()

    def _arm(self) -> None:
        options = self.front.options
        timeout = {Phase.HEADERS: options.header_timeout, Phase.BODY: options.body_timeout, Phase.IDLE: options.idle_timeout}.get(
            self.phase
        )
        if timeout is not None and not self.gone:
            self._timer = self.loop.call_later(timeout, self._expired, self.phase.value)

    def _expired(self, kind: str) -> None:
        if kind == "write":
            self._write_timer = None
        else:
            self._timer = None
            if self._write_timer is not None:
                return  # not reading what we sent: the write deadline judges, resume_writing re-arms
        self.front.table.count_timeout(kind)
        self._close_now()

    def _close_now(self) -> None:
        """Close at once, dropping whatever is still buffered for the client."""
        self.forget()
        if self.transport is not None:
            self.transport.abort()
        elif self.connecting is not None:  # in its TLS handshake
            self.connecting.cancel()
        else:  # TLS, no byte yet: only the socket exists
            self.sock.close()

    def forget(self) -> None:
        """Out of the table, its deadlines cancelled; nothing arms one again."""
        if not self.gone:
            self.gone = True
            self.front.closed(self)
        self._cancel_timer()
        self._cancel_write_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None


class Front:
    """Accepts, admits and connects sockets; follows their requests; counts what it refused."""

    def __init__(
        self,
        table: ConnectionTable,
        options: WebOptions,
        make_handler: Callable[[], FrontHandler],
        loop: asyncio.AbstractEventLoop,
        ssl_context: ssl.SSLContext | None = None,
        count_error: Callable[[str], None] = lambda reason: None,
        accept_errors: dict[str, int] | None = None,
    ) -> None:
        self.table, self.options, self.make_handler, self.loop = table, options, make_handler, loop
        self.ssl_context = ssl_context
        self.malformed = MalformedRequests(count_error)  # request errors by reason (bodies.BodyBudget.count)
        self.rates = AddressRates(options.new_connections_per_second, options.new_connections_burst)
        self.by_handler: dict[object, Connection] = {}  # aiohttp's protocol -> its connection
        self.accept_errors = accept_errors if accept_errors is not None else accept_error_counts()  # by errno name
        self.accept_failing = False
        self.gate = HandshakeGate(loop, options.max_tls_handshakes, self._connect, self._handshake_evicted)
        self.trim = BurstTrim(loop, lambda: self.table.open)
        self.lobby = Lobby(loop, self._spoke, lambda: self.table.count_rejected("full"))

    # --- accepting -----------------------------------------------------------------------------
    def listen(self, sock: socket.socket) -> Callable[[], None]:
        """Accept on ``sock`` until the returned function is called."""
        sock.setblocking(False)
        retry: list[asyncio.TimerHandle] = []

        def ready() -> None:
            for _ in range(ACCEPT_BATCH):
                try:
                    conn, peer = sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except ConnectionAbortedError:  # the client gave up before we took it
                    continue
                except OSError as exc:  # out of descriptors or memory: retrying at once would spin
                    self._accept_failed(exc)
                    self.loop.remove_reader(sock.fileno())
                    retry[:] = [self.loop.call_later(ACCEPT_BACKOFF, self.loop.add_reader, sock.fileno(), ready)]
                    return
                if self.accept_failing:
                    self.accept_failing = False
                    log.info("accepting connections again")
                self.accepted(conn, str(peer[0]) if peer else None)

        self.loop.add_reader(sock.fileno(), ready)

        def stop() -> None:
            for handle in retry:
                handle.cancel()
            self.loop.remove_reader(sock.fileno())
            sock.close()
            self.lobby.close()

        return stop

    def _accept_failed(self, exc: OSError) -> None:
        key = errno_reason(exc)
        self.accept_errors[key] = self.accept_errors.get(key, 0) + 1
        if not self.accept_failing:
            self.accept_failing = True
            log.error(
                "cannot accept connections; pausing accept and retrying",
                extra={"reason": key, "error": str(exc), "retry_seconds": ACCEPT_BACKOFF},
            )

    def accepted(self, sock: socket.socket, address: str | None) -> None:
        """An accepted socket: admitted and connected (TLS: once it sends a byte), or closed."""
        sock.setblocking(False)
        if not self.rates.allow(address):
            self.table.count_rejected("rate_limited")
            sock.close()
            return
        talking = _has_bytes(sock)
        if not talking and (self.table.full or self.table.at_cap(address)):
            # A slot once it speaks: until then it could only take the place of another silent
            # connection, never of one that was served (a flood cannot push out a scraper).
            self.lobby.hold(sock, address)
            return
        self._admit(sock, address, talking)

    def _spoke(self, sock: socket.socket, address: str | None) -> None:
        if _has_bytes(sock):
            self._admit(sock, address, talking=True)
        else:  # it left without a word
            sock.close()

    def _admit(self, sock: socket.socket, address: str | None, talking: bool) -> None:
        conn = Connection(self, sock, address)
        conn.heard = talking
        pool = self.table.admit(conn, talking, probe=talking and self.ssl_context is None and _is_probe(sock))
        if pool is None:
            sock.close()
            return
        self.trim.changed()
        conn.health_only = pool is Pool.HEALTH
        conn.begin()
        if self.ssl_context is None:
            self._connect(conn)
        else:
            self.gate.watch(conn)

    def _connect(self, conn: Connection) -> None:
        tls: dict[str, Any] = {}
        if self.ssl_context is not None:
            tls = {"ssl": self.ssl_context, "ssl_handshake_timeout": self.options.header_timeout + HANDSHAKE_SLACK}
        conn.connecting = self.loop.create_task(self.loop.connect_accepted_socket(lambda: conn, conn.sock, **tls))
        conn.connecting.add_done_callback(functools.partial(self._connected, conn))

    def _connected(self, conn: Connection, task: asyncio.Task[Any]) -> None:
        conn.connecting = None
        if self.ssl_context is not None:
            self.gate.finished(conn)
        if task.cancelled() or task.exception() is not None:
            # A failed handshake, or closed by a deadline or an eviction before it finished:
            # any transport that held the socket no longer watches it.
            conn.sock.close()
            conn.forget()

    def _handshake_evicted(self, conn: Connection) -> None:
        """A stalled handshake of an address at its share, closed for another address's."""
        self.table.count_rejected("evicted")
        conn.evict()

    def closed(self, conn: Connection) -> None:
        self.gate.unwatch(conn)
        self.table.remove(conn)
        self.trim.changed()

    # --- requests ------------------------------------------------------------------------------
    def middleware(self) -> Middleware:
        """Tells each connection when its request's headers are in and when its handler is done;
        health slots answer /healthz and /readyz only."""

        @web.middleware
        async def follow(request: web.Request, handler: Handler) -> web.StreamResponse:
            conn = self.by_handler.get(request.protocol)
            if conn is None:  # not a connection of ours (an app served some other way)
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
                conn.trusted = conn.trusted or request.get(AUTHENTICATED_USER) is not None
                conn.request_finished()
            if conn.health_only:
                response.force_close()  # one probe per health slot: free it at once
            return response

        return follow


# The start of a plain-HTTP health probe's request, as a kubelet or a load balancer sends it.
_PROBE_STARTS = tuple(f"{method} {path}{end}".encode() for method in ("GET", "HEAD") for path in HEALTH_PATHS for end in (" ", "?"))
_PROBE_PEEK = max(len(start) for start in _PROBE_STARTS)


def _is_probe(sock: socket.socket) -> bool:
    """Whether the bytes waiting in the socket begin a /healthz or /readyz request (looked at,
    not read). A TLS client's first bytes are a ClientHello: never a probe here."""
    try:
        return sock.recv(_PROBE_PEEK, socket.MSG_PEEK).startswith(_PROBE_STARTS)
    except OSError:
        return False


def _has_bytes(sock: socket.socket) -> bool:
    """Whether the client has sent something already (looked at, not read: aiohttp reads it)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:  # nothing yet (BlockingIOError), or the client is gone
        return False
