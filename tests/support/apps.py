"""The exporter's web app as `serve` builds it, with the ingest (and a web config) only: for
tests that drive HTTP in-process (aiohttp's test client or a site on 127.0.0.1)."""

from __future__ import annotations

from aiohttp import web

from exporter.jobs import http as ingest_http
from exporter.jobs.collector import JobCollector
from exporter.jobs.store import IngestStore
from exporter.node.exposition import Exposition, Rendering
from exporter.node.snapshot import SnapshotStore
from exporter.web.app import create_app
from exporter.web.collector import WebCollector
from exporter.web.security import WebSecurity


def ingest_app(ingest: IngestStore | None, token: str | None = None, security: WebSecurity | None = None) -> web.Application:
    """/metrics renders the ingest's and the web config's metrics; ``ingest=None``: no ingest API."""
    store = SnapshotStore(jobs=ingest.part if ingest else None, web=security.part if security else None)
    renderings = []
    if ingest is not None:
        renderings.append(Rendering(JobCollector(), lambda s: s.jobs))
    if security is not None:
        renderings.append(Rendering(WebCollector(), lambda s: s.web))
    exposition = Exposition(store, renderings)   # served as `serve` serves it: encoded parts
    routes = ingest_http.routes(ingest, token) if ingest is not None else []
    ready = lambda: store.sampled.ready  # noqa: E731 (never: nothing is sampled here)
    return create_app(exposition, ready, routes=routes, bearer_paths=ingest_http.bearer_paths(token), security=security)
