"""aiohttp app: /metrics, /healthz, /readyz and a landing page. Scrapes read the snapshot only."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from exporter import __version__
from exporter.api import STEPS_PATH
from exporter.api.steps import openapi_handler, steps_handler
from exporter.ingest import IngestStore
from exporter.sampler import SnapshotStore
from exporter.webconfig import WebSecurity, install

REGISTRY = web.AppKey("registry", CollectorRegistry)
STORE = web.AppKey("store", SnapshotStore)

BackgroundTask = Callable[[], Awaitable[None]]

_LANDING = """<!doctype html>
<html><head><meta charset="utf-8"><title>cann-exporter</title></head>
<body><h1>cann-exporter {version}</h1>
<p>Prometheus exporter for Huawei Ascend NPU nodes.</p>
<ul><li><a href="/metrics">/metrics</a></li><li><a href="/healthz">/healthz</a></li>
<li><a href="/readyz">/readyz</a></li></ul></body></html>
"""


async def metrics(request: web.Request) -> web.StreamResponse:
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(request.app[REGISTRY])
    headers = {"Content-Type": content_type}
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        body = gzip.compress(body, compresslevel=5)
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    if request.app[STORE].current.ready:
        return web.Response(text="ready\n")
    return web.Response(status=503, text="waiting for the first sample\n")


async def landing(request: web.Request) -> web.Response:
    return web.Response(text=_LANDING.format(version=__version__), content_type="text/html")


def create_app(
    registry: CollectorRegistry,
    store: SnapshotStore,
    background: Sequence[BackgroundTask] = (),
    *,
    ingest: IngestStore | None = None,
    ingest_token: str | None = None,
    web_security: WebSecurity | None = None,
) -> web.Application:
    """The exporter's web app; ``background`` coroutines run for the app's lifetime.

    With an ``ingest`` store, training hooks may POST steps (bearer ``ingest_token`` if set).
    With ``web_security`` (--web.config.file), basic auth guards every route but the exempt
    ones, its headers go on every response, and its files are watched for changes.
    """
    app = web.Application(client_max_size=1 << 20)
    if web_security is not None:
        install(app, web_security)
        if ingest is not None and ingest_token is not None:
            web_security.bearer_paths = frozenset({STEPS_PATH})  # hooks may keep sending their token
        background = [*background, web_security.watch]
    app[REGISTRY] = registry
    app[STORE] = store
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/", landing)
    if ingest is not None:
        app.router.add_post(STEPS_PATH, steps_handler(ingest, ingest_token))
        app.router.add_get("/api/v1/openapi.yaml", openapi_handler())
    for task in background:
        app.cleanup_ctx.append(_background(task))
    return app


def _background(run: BackgroundTask) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return ctx
