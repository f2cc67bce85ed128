"""The exporter's web app as `serve` builds it, with the ingest (and a web config) only: for
tests that drive HTTP in-process (aiohttp's test client or a site on 127.0.0.1)."""

from __future__ import annotations

from aiohttp import web

from exporter.core.snapshot import Snapshot
from exporter.jobs import http as ingest_http
from exporter.jobs.collector import JobCollector
from exporter.jobs.store import JOBS, IngestStore
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import Publisher
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.part import PROFILES
from exporter.profiles.posted import PostedProfiles, merged
from exporter.web.app import create_app
from exporter.web.collector import WEB, WebCollector
from exporter.web.security import WebSecurity

PUBLISHER: web.AppKey[Publisher] = web.AppKey("publisher")


def ingest_app(
    ingest: IngestStore | None, token: str | None = None, security: WebSecurity | None = None, posted: PostedProfiles | None = None
) -> web.Application:
    """/metrics renders the ingest's and the web config's metrics; ``ingest=None``: no ingest API;
    ``posted``: POST /api/v1/profiles too, its summaries published as the profiles part. The
    publisher runs as `serve` runs it (the app's background task); :func:`settled` makes a
    pair of the parts as they are now, for a test that scrapes right after a change."""
    live = {**({JOBS.name: ingest.part} if ingest else {}), **({WEB.name: security.part} if security else {})}
    renderings = []
    if posted is not None:
        renderings.append(Rendering(ProfileCollector(), PROFILES.name))
    if ingest is not None:
        renderings.append(Rendering(JobCollector(), JOBS.name))
    if security is not None:
        renderings.append(Rendering(WebCollector(), WEB.name))
    exposition = Exposition(renderings)  # served as `serve` serves it: encoded parts
    publisher = Publisher(exposition, live)

    def publish() -> None:
        assert posted is not None
        publisher.publish(Snapshot.of(False, {PROFILES.name: merged(None, posted.summaries())}))

    routes = ingest_http.routes(ingest, token, posted, publish) if ingest is not None else []
    ready = lambda: publisher.served.snapshot.ready  # noqa: E731 (never: nothing is sampled here)
    app = create_app(
        publisher, ready, routes=routes, bearer_paths=ingest_http.bearer_paths(token), security=security, background=[publisher.run]
    )
    app[PUBLISHER] = publisher
    return app


async def settled(app: web.Application) -> None:
    """The app's publisher has swapped in the pair of its parts as they are now (the live parts
    are otherwise read once a second)."""
    await app[PUBLISHER].swap()
