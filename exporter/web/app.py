"""The aiohttp app: /metrics, /healthz, /readyz, the landing page and the routes callers add.

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
from exporter.web.landing import About, render, routes
from exporter.web.middleware import install
from exporter.web.security import WebSecurity

REGISTRY = web.AppKey("registry", CollectorRegistry)
READY = web.AppKey("ready", Callable[[], bool])
ABOUT = web.AppKey("about", object)   # Callable[[], About] | None: what `/` says runs

BackgroundTask = Callable[[], Awaitable[None]]

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
    about = request.app[ABOUT]
    page = render(__version__, routes(request.app), about() if about is not None else None)
    return web.Response(text=page, content_type="text/html")


def create_app(
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    *,
    routes: Sequence[web.AbstractRouteDef] = (),
    bearer_paths: frozenset[str] = frozenset(),
    security: WebSecurity | None = None,
    background: Sequence[BackgroundTask] = (),
    about: Callable[[], About] | None = None,
) -> web.Application:
    """The exporter's web app; ``background`` coroutines run for the app's lifetime.

    With ``security`` (--web.config.file), basic auth guards every route but the exempt ones
    (and requests with a bearer token on ``bearer_paths``, whose handlers check it), its
    headers go on every response, and its files are watched for changes. ``about`` tells
    the landing page which collectors and sources run.
    """
    app = web.Application(client_max_size=1 << 20)
    if security is not None:
        install(app, security, bearer_paths)
        background = [*background, security.watch]
    app[REGISTRY] = registry
    app[READY] = ready
    app[ABOUT] = about
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
