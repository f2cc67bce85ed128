"""aiohttp's per-connection request handler as the exporter runs it: the 400s of its parser say
``Server: cann-exporter`` like every other answer, a connection whose request was refused is
read no further, malformed requests are counted and logged at most once per address and minute
(with the count, never a traceback), and there is no access log. The listener (guard.py) makes
one per admitted connection.

Stricter than aiohttp's parser where HTTP/1.1 lets a server be: a request line without an HTTP
version (HTTP/0.9, which aiohttp answers as ``HTTP/0.9 200 OK``) and a request-target that is not
a path (``GET http://host/metrics``, ``CONNECT host:443``; ``OPTIONS *`` passes) are refused like
what the parser refuses (400). A ``Content-Encoding`` aiohttp cannot decode (``br``, ``zstd``
without their libraries), which its parser refuses as a bad request, gets ``415``, as every
encoding the exporter does not decode (bodies.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http import HttpVersion10
from aiohttp.http_exceptions import BadHttpMessage, ContentEncodingError, HttpProcessingError
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import EMPTY_PAYLOAD
from aiohttp.web_protocol import RequestPayloadError, _ErrInfo

log = logging.getLogger("exporter.web")

SERVER = "cann-exporter"  # the Server header: no versions, they only help match known flaws
# A body left unread (refused, 413/503) is still read and dropped this long after the answer, so
# the client sees the answer rather than a reset; aiohttp's 10 s would let refused bodies
# hold their connections.
LINGER = 1.0
MALFORMED_LOG_EVERY = 60.0  # seconds: one log line per address and window, with the count
MAX_LOGGED_ADDRESSES = 4096  # addresses remembered for that; past it the window restarts for all


class MalformedRequests:
    """Requests aiohttp refused: counted; logged once per address and minute, with a count."""

    def __init__(self, count_error: Callable[[str], None] = lambda reason: None) -> None:
        self.count_error = count_error  # request errors by reason (bodies.BodyBudget.count)
        self._logged: dict[str | None, tuple[float, int]] = {}  # address -> (window start, count)

    def refused(self, address: str | None, exc: HttpProcessingError) -> None:
        self.count_error("bad_request")
        now = time.monotonic()
        start, count = self._logged.get(address, (-MALFORMED_LOG_EVERY, 0))
        if now - start < MALFORMED_LOG_EVERY:
            self._logged[address] = (start, count + 1)
            return
        if len(self._logged) >= MAX_LOGGED_ADDRESSES:
            self._logged.clear()
        self._logged[address] = (now, 1)
        log.warning(
            "malformed request refused (400); more from this address are counted, logged again after a minute",
            extra={"remote": address, "error": str(exc.message)[:120], "since_last_log": count},
        )


def misframed(message: RawRequestMessage) -> str | None:
    """Why a request aiohttp's parser took is refused all the same, or None."""
    if message.version < HttpVersion10:
        return "no HTTP version in the request line (HTTP/0.9)"
    if not message.path.startswith("/") and not (message.method == "OPTIONS" and message.path == "*"):
        return "the request-target is not a path (absolute or authority form)"
    return None


class NoAccessLog(AbstractAccessLogger):
    """No access log: a line per request would be a log flood of its own."""

    @property
    def enabled(self) -> bool:
        return False

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        pass


class FrontHandler(web.RequestHandler):
    """aiohttp's protocol for one connection, whose own error answers (the 400s of its parser)
    say ``Server: cann-exporter`` and are counted and logged (:class:`MalformedRequests`), never with
    a traceback."""

    __slots__ = ("malformed", "refusing")
    malformed: MalformedRequests
    refusing: bool

    def data_received(self, data: bytes) -> None:
        """After a request aiohttp's parser refused, nothing more is read: the parser would turn
        every later chunk into an error of its own whose message quotes the chunk, each held
        until answered (hundreds of MiB from a few hundred clients sending bodies)."""
        if self.refusing:
            return
        queued = len(self._messages)
        super().data_received(data)
        for index in range(queued, len(self._messages)):
            message = self._messages[index][0]
            if isinstance(message, RawRequestMessage) and (problem := misframed(message)) is not None:
                while len(self._messages) > index:  # it and anything pipelined behind it
                    self._messages.pop()
                self._messages.append((_ErrInfo(status=400, exc=BadHttpMessage(problem), message=problem), EMPTY_PAYLOAD))
                break
        if self._messages and not isinstance(self._messages[-1][0], RawRequestMessage):  # an error queued
            self.refusing = True
            if self.transport is not None:
                self.transport.pause_reading()

    def handle_error(
        self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            response = super().handle_error(request, status, exc, message)  # a bug of ours: logged in full
        elif request.writer.output_size > 0:
            raise ConnectionError("response already sent")  # as aiohttp does: the connection closes
        elif isinstance(exc, ContentEncodingError):  # an encoding aiohttp cannot decode: refused, as any other
            self.malformed.count_error("unsupported_encoding")
            response = web.Response(status=415, text="Content-Encoding not supported: use gzip, deflate or none\n")
            response.force_close()
        else:
            self.malformed.refused(request.remote, exc)
            response = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}\n")
            response.force_close()
        response.headers["Server"] = SERVER
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        if isinstance(kw.get("exc_info"), RequestPayloadError):
            return  # the rest of a body already answered (400, counted) that aiohttp tried to drain
        super().log_exception(*args, **kw)
