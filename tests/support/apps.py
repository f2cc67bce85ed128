"""The exporter's web app as `serve` builds it, with the ingest (and a web config) only: for
tests that drive HTTP in-process (aiohttp's test client or a site on 127.0.0.1)."""

from __future__ import annotations

from aiohttp import web

from exporter.jobs import http as ingest_http
from exporter.jobs.collector import JobCollector
from exporter.jobs.store import IngestStore
from exporter.node.exposition import Exposition, Rendering
from exporter.node.snapshot import Snapshot, SnapshotStore
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.posted import PostedProfiles, merged
from exporter.web.app import create_app
from exporter.web.collector import WebCollector
from exporter.web.security import WebSecurity


def ingest_app(ingest: IngestStore | None, token: str | None = None, security: WebSecurity | None = None,
               posted: PostedProfiles | None = None) -> web.Application:
    """/metrics renders the ingest's and the web config's metrics; ``ingest=None``: no ingest API;
    ``posted``: POST /api/v1/profiles too, its summaries published as the profiles part."""
    store = SnapshotStore(jobs=ingest.part if ingest else None, web=security.part if security else None)
    renderings = []
    if posted is not None:
        renderings.append(Rendering(ProfileCollector(), lambda s: s.profiles))
    if ingest is not None:
        renderings.append(Rendering(JobCollector(), lambda s: s.jobs))
    if security is not None:
        renderings.append(Rendering(WebCollector(), lambda s: s.web))
    exposition = Exposition(store, renderings)   # served as `serve` serves it: encoded parts
    def publish() -> None:
        assert posted is not None
        store.publish(Snapshot(profiles=merged(None, posted.summaries())))

    routes = ingest_http.routes(ingest, token, posted, publish) if ingest is not None else []
    ready = lambda: store.sampled.ready  # noqa: E731 (never: nothing is sampled here)
    return create_app(exposition, ready, routes=routes, bearer_paths=ingest_http.bearer_paths(token), security=security)
