"""Request bodies: one budget for the bytes in flight across all connections, and the
encodings a body may come in.

aiohttp reads a body only as its handler asks for it (at most a read buffer ahead), and a
handler reads up to the per-request cap. So what many slow clients can make the process
hold is what their handlers have been allowed to read: each request that has a body reserves
its announced length (its cap when the length is unknown or the body is compressed, as it
may inflate to the cap) before its handler runs, and gives it back when the handler is done.
A body that would pass the budget gets 503 at once, a body over the cap 413, both unread and
the connection closed, so nothing of them is buffered.

A compressed body that does not decompress is the client's fault (400, not a 500 with a
traceback); an encoding aiohttp does not decode is refused (415).
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_exceptions import HTTPRequestEntityTooLarge
from aiohttp.web_protocol import RequestPayloadError

# A request body a handler reads at most, decompressed (the app's client_max_size).
MAX_BODY_BYTES = 1 << 20
# What aiohttp decompresses itself (identity: none).
ENCODINGS = frozenset({"identity", "gzip", "deflate"})
RETRY_AFTER = "1"  # seconds: bodies in flight are read within the body deadline, or dropped
# request errors by reason: bad_request (aiohttp's parser refused it, 400), bad_encoding (a body
# that does not decode, 400), unsupported_encoding (415), too_large (over the per-request cap,
# 413), busy (the budget of bodies in flight is spent, 503).
ERROR_REASONS = ("bad_request", "bad_encoding", "unsupported_encoding", "too_large", "busy")


class BodyBudget:
    """Bytes reserved by requests whose handlers may still read them; the counts of refusals."""

    def __init__(self, limit: int, per_request: int) -> None:
        self.limit, self.per_request = limit, per_request
        self.in_flight = 0
        self.errors = dict.fromkeys(ERROR_REASONS, 0)

    def reserve(self, size: int) -> bool:
        if self.in_flight + size > self.limit:
            return False
        self.in_flight += size
        return True

    def release(self, size: int) -> None:
        self.in_flight -= size

    def count(self, reason: str) -> None:
        self.errors[reason] += 1

    def middleware(self) -> Middleware:
        @web.middleware
        async def bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
            if not request.body_exists:
                return await handler(request)
            encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ENCODINGS:
                return self._refuse("unsupported_encoding", 415, "Content-Encoding not supported: use gzip, deflate or none")
            size = request.content_length
            if size is not None and size > self.per_request:
                return self._refuse("too_large", 413, f"request body over {self.per_request} bytes")
            reserved = self.per_request if size is None or encoding != "identity" else size
            if not self.reserve(reserved):
                return self._refuse("busy", 503, "too many request bodies in flight; retry later", {"Retry-After": RETRY_AFTER})
            try:
                return await handler(request)
            except HTTPRequestEntityTooLarge:  # read past the cap (decompressed, or chunked)
                return self._refuse("too_large", 413, f"request body over {self.per_request} bytes")
            except RequestPayloadError:  # a body that does not decode, or broken chunks
                return self._refuse("bad_encoding", 400, "request body does not decode")
            finally:
                self.release(reserved)

        return bodies

    def _refuse(self, reason: str, status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
        self.count(reason)
        # The ingest API's error document (exporter/jobs/openapi.yaml, Error): every route with a body is JSON.
        response = web.json_response({"error": message, "reason": reason}, status=status, headers=headers)
        response.force_close()  # the body stays unread: never drained into memory
        return response
