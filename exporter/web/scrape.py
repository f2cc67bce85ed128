"""GET /metrics: the format the scraper asks for, bytes that were encoded before, gzip kept
for a body that did not change, and every encode or compress off the event loop.

The event loop only checks that the cached encodings are current and joins them. Before a
sampler run's changes are published, the one encoder thread encodes them, and gzips the new
body, for every format and encoding scraped in the last ``WANTED_SECONDS`` and since it was
last prepared: scrapes meanwhile get the body before the change, ready, and the first one after
it finds its bytes ready too; data that changes faster than it is scraped is encoded ahead
once per scrape, not once per change. A
part that changes between runs (training steps, connection counts) is encoded when a scrape
finds it changed; scrapes arriving during an encode wait for that one encode rather than each
starting their own. Gzip compresses only the parts that changed (gzip_parts.py). A scrape
therefore never holds the loop for longer than a join, whatever the number of series, and
/healthz stays answered while a large body is being made.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as encode_text
from prometheus_client.openmetrics.exposition import (
    generate_latest as encode_openmetrics,
)

from exporter.web.gzip_parts import PartsGzip

T = TypeVar("T")

CONTENT_TYPES = {
    False: "text/plain; version=0.0.4; charset=utf-8",
    True: "application/openmetrics-text; version=1.0.0; charset=utf-8",
}
GZIP_LEVEL = 5
# A format and encoding is prepared ahead after a change while someone scraped it this recently
# (Prometheus scrapes every 10 s to 2 min; a one-off curl is not worth encoding for an hour).
WANTED_SECONDS = 600.0
KEPT_GZIPS = 2  # per format: the served body's gzip and the prepared one's (node/exposition.py KEPT)


class MetricsBody(Protocol):
    def ready_body(self, openmetrics: bool) -> bytes | None:
        """The body if it needs no encoding (cheap: called on the event loop), else None."""

    def body(self, openmetrics: bool) -> bytes:
        """The body, encoding what changed (called in the encoder thread)."""

    def parts_of(self, body: bytes) -> Sequence[bytes] | None:
        """The pieces ``body`` joins, if known: gzip then compresses only those that changed."""

    def prepare_with(self, preparer: Callable[[Callable[[bool], bytes]], Awaitable[None]]) -> Callable[[], None]:
        """Before the body changes by itself, hand ``preparer`` the function that encodes the
        coming body in a format, until the returned function is called."""


class RegistryBody:
    """A plain prometheus_client registry: rendered on every scrape (tests and tools)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def ready_body(self, openmetrics: bool) -> bytes | None:
        return None

    def body(self, openmetrics: bool) -> bytes:
        return encode_openmetrics(self.registry) if openmetrics else encode_text(self.registry)

    def parts_of(self, body: bytes) -> Sequence[bytes] | None:
        return None

    def prepare_with(self, preparer: Callable[[Callable[[bool], bytes]], Awaitable[None]]) -> Callable[[], None]:
        return lambda: None  # rendered per scrape: nothing to prepare


def wants_openmetrics(accept: str) -> bool:
    """OpenMetrics 1.0 when the Accept header lists it (without a version, or 1.0.0) before
    the text format; anything else, malformed parameters included, gets the text format."""
    for entry in accept.split(","):
        media, *params = (token.strip() for token in entry.split(";"))
        if media == "text/plain":
            return False
        if media == "application/openmetrics-text":
            versions = [p.partition("=")[2].strip().strip('"') for p in params if p.partition("=")[0].strip().lower() == "version"]
            if not versions or versions[0] == "1.0.0":
                return True
    return False


def accepts_gzip(accept_encoding: str) -> bool:
    for entry in accept_encoding.split(","):
        coding, *params = (token.strip().lower() for token in entry.split(";"))
        if coding == "gzip":
            return not any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params)
    return False


Variant = tuple[bool, bool]  # (openmetrics, gzip)


class Scrapes:
    """The /metrics handler's state: the body source, one encoder thread, the gzip cache, and
    the variants scraped lately (prepared before a change is published)."""

    def __init__(self, source: MetricsBody, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self._clock = clock
        self._executor: ThreadPoolExecutor | None = None
        self._encoding = asyncio.Lock()
        # openmetrics -> (body, its gzip), newest first, KEPT_GZIPS of them
        self._gzipped: dict[bool, tuple[tuple[bytes, bytes], ...]] = {}
        self._parts_gzip = {openmetrics: PartsGzip(GZIP_LEVEL) for openmetrics in (False, True)}
        self._wanted: dict[Variant, float] = {}  # variant -> when it was last scraped
        self._scraped_since: set[Variant] = set()  # scraped since it was last prepared

    async def lifetime(self, app: web.Application) -> AsyncIterator[None]:
        """cleanup_ctx: the encoder thread lives as long as the app, and prepares changes."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-encoder")
        stop_preparing = self.source.prepare_with(self._prepare)
        yield
        stop_preparing()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = None

    async def handle(self, request: web.Request) -> web.Response:
        openmetrics = wants_openmetrics(request.headers.get("Accept", ""))
        gzipped = accepts_gzip(request.headers.get("Accept-Encoding", ""))
        self._wanted[(openmetrics, gzipped)] = self._clock()
        self._scraped_since.add((openmetrics, gzipped))
        body = await self._body(openmetrics)
        headers = {"Content-Type": CONTENT_TYPES[openmetrics]}
        if gzipped:
            body = await self._gzip(openmetrics, body)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def _prepare(self, render: Callable[[bool], bytes]) -> None:
        """Encode (and gzip) the coming body in the variants scraped lately, the latest first;
        only those scraped since they were last prepared, so data that changes more often than
        it is scraped costs no more encodes than scrapes (the scrape encodes what changed since)."""
        now = self._clock()
        for variant, scraped in sorted(self._wanted.items(), key=lambda item: -item[1]):
            if now - scraped > WANTED_SECONDS:
                del self._wanted[variant]
                continue
            if variant not in self._scraped_since:
                continue
            self._scraped_since.discard(variant)
            openmetrics, gzipped = variant
            async with self._encoding:
                body = await self._run(render, openmetrics)
            if gzipped:
                await self._gzip(openmetrics, body)

    async def _body(self, openmetrics: bool) -> bytes:
        body = self.source.ready_body(openmetrics)
        if body is not None:
            return body
        async with self._encoding:  # the scrapes that waited find the body ready
            body = self.source.ready_body(openmetrics)
            return body if body is not None else await self._run(self.source.body, openmetrics)

    async def _gzip(self, openmetrics: bool, body: bytes) -> bytes:
        compressed = self._gzip_of(openmetrics, body)
        if compressed is not None:
            return compressed
        async with self._encoding:  # as for encodes: one compress of a body, however many wait
            compressed = self._gzip_of(openmetrics, body)
            if compressed is None:
                compressed = await self._run(self._compress, openmetrics, body)
                kept = self._gzipped.get(openmetrics, ())
                self._gzipped[openmetrics] = ((body, compressed), *kept[: KEPT_GZIPS - 1])
            return compressed

    def _gzip_of(self, openmetrics: bool, body: bytes) -> bytes | None:
        return next((compressed for plain, compressed in self._gzipped.get(openmetrics, ()) if plain is body), None)

    def _compress(self, openmetrics: bool, body: bytes) -> bytes:
        parts = self.source.parts_of(body)
        if parts is None:
            return gzip.compress(body, compresslevel=GZIP_LEVEL)
        return self._parts_gzip[openmetrics].gzip(parts, body)

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        if self._executor is None:  # an app used without its cleanup_ctx (a bare test client)
            return work(*args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, work, *args)
