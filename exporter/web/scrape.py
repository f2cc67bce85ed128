"""GET /metrics: the format and content coding the scraper asks for, and the body of the latest
(snapshot, bodies) pair in that variant (core/exposed.py).

The bodies are made below the web layer, off the event loop (node/publisher.py): a scrape reads
bytes made ahead, or waits for the one encode of a variant the pair lacks, and /healthz stays
answered meanwhile. The handler never encodes, compresses or reads a source itself.
"""

from __future__ import annotations

import asyncio
import gzip

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as encode_text
from prometheus_client.openmetrics.exposition import (
    generate_latest as encode_openmetrics,
)

from exporter.core.exposed import Exposed, Variant

CONTENT_TYPES = {
    False: "text/plain; version=0.0.4; charset=utf-8",
    True: "application/openmetrics-text; version=1.0.0; charset=utf-8",
}
GZIP_LEVEL = 5


class RegistryBody:
    """A plain prometheus_client registry, rendered on every scrape in a worker thread (tests
    and tools)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    async def body(self, variant: Variant) -> bytes:
        return await asyncio.to_thread(self._render, variant)

    def _render(self, variant: Variant) -> bytes:
        body = encode_openmetrics(self.registry) if variant.openmetrics else encode_text(self.registry)
        return gzip.compress(body, compresslevel=GZIP_LEVEL) if variant.gzip else body


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


def metrics_handler(exposed: Exposed) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        variant = Variant(wants_openmetrics(request.headers.get("Accept", "")), accepts_gzip(request.headers.get("Accept-Encoding", "")))
        body = await exposed.body(variant)
        headers = {"Content-Type": CONTENT_TYPES[variant.openmetrics]}
        if variant.gzip:
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    return handle
