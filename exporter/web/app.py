"""The aiohttp app: /metrics, /healthz, /readyz, the landing page and the routes callers add.

Scrapes serve the bodies of the latest (snapshot, bodies) pair (scrape.py): a scrape never
waits on a source. The app knows nothing of sources; the serve command hands it what it reads
the bodies from (the node's publisher), a readiness check, extra routes (the ingest API) and
the web config.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter import __version__
from exporter.core.about import About
from exporter.core.exposed import Exposed
from exporter.web import runbooks
from exporter.web.bodies import MAX_BODY_BYTES
from exporter.web.handler import SERVER
from exporter.web.landing import render, routes
from exporter.web.middleware import install
from exporter.web.scrape import RegistryBody, metrics_handler
from exporter.web.security import WebSecurity

ABOUT: web.AppKey[Callable[[], About] | None] = web.AppKey("about")  # what `/` says runs
READY: web.AppKey[Callable[[], bool]] = web.AppKey("ready")  # whether the first sample is in

BackgroundTask = Callable[[], Coroutine[Any, Any, None]]


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    if not request.app[READY]():
        return web.Response(status=503, text="waiting for the first complete sample (every chip with its device id)\n")
    return web.Response(text="ready\n")


async def landing(request: web.Request) -> web.Response:
    about = request.app[ABOUT]
    page = render(__version__, routes(request.app), about() if about is not None else None)
    return web.Response(text=page, content_type="text/html")


def create_app(
    metrics: Exposed | CollectorRegistry,
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
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    if security is not None:
        install(app, security, bearer_paths)
        background = [*background, security.watch]
        app.on_cleanup.append(_closer(security))
    app.on_response_prepare.append(server_header)
    app[ABOUT] = about
    app[READY] = ready
    app.router.add_get("/metrics", metrics_handler(RegistryBody(metrics) if isinstance(metrics, CollectorRegistry) else metrics))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/", landing)
    app.router.add_get(runbooks.PATH, runbooks.runbooks)
    app.router.add_routes(routes)
    for task in background:
        app.cleanup_ctx.append(_background(task))
    return app


def _closer(security: WebSecurity) -> Callable[[web.Application], Awaitable[None]]:
    async def close(app: web.Application) -> None:  # its bcrypt threads end with the app
        security.close()

    return close


async def server_header(request: web.Request, response: web.StreamResponse) -> None:
    """No versions in `Server`: they only help someone match the host to known flaws."""
    response.headers["Server"] = SERVER


def _background(run: BackgroundTask) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return ctx
