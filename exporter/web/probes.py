"""Health probes answered at accept or by the connection itself, before aiohttp sees a byte.

A kubelet probe is one short `GET /healthz` (or `/readyz`) on a new connection. Through
aiohttp it costs a request object, a task, the middleware chain and a response object, and
waits for several turns of an event loop that a flood may keep busy; answered here it is
written in the same callback that read it. A client that pipelines hundreds of probes (a
cheap way to burn a server's CPU) costs a lookup per probe, not a request.

Only the plain form is answered here: exactly `GET /healthz` or `GET /readyz` over
HTTP/1.0 or 1.1, well-formed header lines, no body, no Expect or Upgrade, and a route that
needs no credentials and no client certificate check under the current web config. Anything
else, from the first byte that does not fit on, is aiohttp's to answer (its 400s, 401s and
405s included). The answers are those of the app's routes: the same status, body and headers
(the web config's among them). A probe that asks to close its connection, whole in the socket
when it is accepted, is answered by the acceptor (:func:`answer_at_accept`).
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from exporter.web.limits import HEALTH_PATHS
from exporter.web.security import WebSecurity

SERVER = "cann-exporter"          # the Server header: no versions, they only help match known flaws
HEALTHY = "ok\n"
READY = "ready\n"
NOT_READY = "waiting for the first sample\n"
CONTENT_TYPE = "text/plain; charset=utf-8"
# A probe's head is a few hundred bytes; a request head larger than this is not one.
MAX_PROBE_HEAD = 4096

_PROBE_STARTS = tuple(f"GET {path} ".encode() for path in sorted(HEALTH_PATHS))
_PATHS = b"|".join(re.escape(path.encode()) for path in sorted(HEALTH_PATHS))
_REQUEST_LINE = re.compile(rb"GET (" + _PATHS + rb") HTTP/1\.([01])")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\x00-\x08\x0a-\x1f\x7f]*?)[ \t]*")
_NOT_OURS = frozenset({b"transfer-encoding", b"expect", b"upgrade"})
_OWN_HEADERS = frozenset({"content-type", "content-length", "date", "server", "connection"})
_REASONS = {200: "OK", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Answer:
    payload: bytes
    close: bool


class Probes:
    """What /healthz and /readyz answer, for the routes and for the connections."""

    def __init__(self, ready: Callable[[], bool], security: WebSecurity | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        self.ready, self.security, self.wall = ready, security, wall
        self.answered = 0               # probes answered without aiohttp (at accept or by a connection)
        self._date: tuple[int, str] = (-1, "")

    def status(self, path: str) -> tuple[int, str]:
        if path == "/readyz" and not self.ready():
            return 503, NOT_READY
        return 200, READY if path == "/readyz" else HEALTHY

    def answer(self, head: bytes, *, closing_only: bool = False) -> Answer | None:
        """The whole answer to a request ``head`` (without its blank line), or None when the
        request is not a plain probe this connection may answer (``closing_only``: or one that
        would keep the connection open)."""
        request_line, *lines = head.split(b"\r\n")
        match = _REQUEST_LINE.fullmatch(request_line)
        if match is None:
            return None
        path, minor = match.group(1).decode(), match.group(2)
        keep_alive = minor == b"1"
        for line in lines:
            header = _HEADER_LINE.fullmatch(line)
            if header is None:
                return None
            name, value = header.group(1).lower(), header.group(2)
            if name in _NOT_OURS or (name == b"content-length" and value != b"0"):
                return None
            if name == b"connection":
                tokens = {token.strip().lower() for token in value.split(b",")}
                keep_alive = b"close" not in tokens and (keep_alive or b"keep-alive" in tokens)
        extra = self._headers_for(path)
        if extra is None or (closing_only and keep_alive):
            return None
        self.answered += 1
        return Answer(self._payload(minor, *self.status(path), extra, keep_alive), close=not keep_alive)

    def _headers_for(self, path: str) -> dict[str, str] | None:
        """The web config's response headers, or None when the route is guarded."""
        if self.security is None:
            return {}
        config = self.security.state.config
        if config.tls is not None and config.tls.client_allowed_sans is not None:
            return None
        if config.users and path not in self.security.exempt_paths:
            return None
        return {name: value for name, value in config.headers.items() if name.lower() not in _OWN_HEADERS}

    def _payload(self, minor: bytes, status: int, text: str, headers: dict[str, str], keep_alive: bool) -> bytes:
        body = text.encode()
        lines = [f"HTTP/1.{minor.decode()} {status} {_REASONS[status]}", f"Content-Type: {CONTENT_TYPE}",
                 f"Content-Length: {len(body)}", f"Date: {self._http_date()}", f"Server: {SERVER}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if not keep_alive:
            lines.append("Connection: close")
        elif minor == b"0":
            lines.append("Connection: keep-alive")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _http_date(self) -> str:
        second = int(self.wall())
        if self._date[0] != second:
            self._date = (second, time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(second)))
        return self._date[1]


PROBES = web.AppKey("probes", Probes)


def answer_at_accept(probes: Probes, sock: socket.socket) -> bool:
    """Answer and close a just-accepted plain-text socket when all it has sent is one whole
    probe that asks to close (a kubelet's): written in the callback that accepted it, three
    turns of a busy event loop sooner than through a connection, and before the connection
    cap, so a full table never turns the kubelet away. Anything else is left unread."""
    try:
        data = sock.recv(MAX_PROBE_HEAD + 1, socket.MSG_PEEK)
    except OSError:        # nothing yet (EAGAIN), or already reset
        return False
    end = data.find(b"\r\n\r\n")
    if end < 0 or end + 4 != len(data):
        return False
    answer = probes.answer(data[:end], closing_only=True)
    if answer is None:
        return False
    try:
        sock.recv(len(data))        # taken off the socket, so closing it sends no reset
        sock.send(answer.payload)   # a few hundred bytes into an empty send buffer
    except OSError:
        pass                        # the client is gone: nothing to answer
    sock.close()
    return True


def may_be_probe(start: bytes) -> bool:
    """Whether an incomplete request head could still turn out to be a probe."""
    return len(start) <= MAX_PROBE_HEAD and any(p.startswith(start[:len(p)]) for p in _PROBE_STARTS)
