"""The aiohttp app: /metrics, /healthz, /readyz, a landing page and the routes callers add.

Scrapes render the registry, whose collectors read the latest snapshot only: a scrape never
waits on a source. The app knows nothing of sources; the serve command hands it the registry,
a readiness check, extra routes (the ingest API) and the web config.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from exporter import __version__
from exporter.web.middleware import install
from exporter.web.security import WebSecurity

REGISTRY = web.AppKey("registry", CollectorRegistry)
READY = web.AppKey("ready", Callable[[], bool])

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
    if request.app[READY]():
        return web.Response(text="ready\n")
    return web.Response(status=503, text="waiting for the first sample\n")


async def landing(request: web.Request) -> web.Response:
    return web.Response(text=_LANDING.format(version=__version__), content_type="text/html")


def create_app(
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    *,
    routes: Sequence[web.AbstractRouteDef] = (),
    bearer_paths: frozenset[str] = frozenset(),
    security: WebSecurity | None = None,
    background: Sequence[BackgroundTask] = (),
) -> web.Application:
    """The exporter's web app; ``background`` coroutines run for the app's lifetime.

    With ``security`` (--web.config.file), basic auth guards every route but the exempt ones
    (and requests with a bearer token on ``bearer_paths``, whose handlers check it), its
    headers go on every response, and its files are watched for changes.
    """
    app = web.Application(client_max_size=1 << 20)
    if security is not None:
        install(app, security, bearer_paths)
        background = [*background, security.watch]
    app[REGISTRY] = registry
    app[READY] = ready
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/", landing)
    app.router.add_routes(routes)
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
