"""The landing page at `/`: version, every endpoint, each collector on or off and each
source's last success, so a person who opens the port sees what runs without reading logs."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence

from aiohttp import web

from exporter.core.about import About
from exporter.core.health import SourceStatus

# What each endpoint is for; a route without an entry is listed by its path alone.
ENDPOINTS = {
    "/metrics": "Prometheus exposition (OpenMetrics on request, gzip when asked)",
    "/healthz": "liveness: the process answers",
    "/readyz": "readiness: the first sample is done",
    "/api/v1/steps": "training-hook iteration timings (JSON, bearer token when set)",
    "/api/v1/profiles": "profiling-window summaries from the training hooks (JSON, bearer token when set)",
    "/api/v1/openapi.yaml": "OpenAPI document of the ingest API",
    "/runbooks": "what to do about each alert (the alerts' runbook links)",
    "/": "this page",
}


def routes(app: web.Application) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, HEAD left out (aiohttp adds it to GETs)."""
    out = []
    for route in app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method != "HEAD" and (route.method, path) not in out:
            out.append((route.method, path))
    return out


def render(version: str, endpoints: Sequence[tuple[str, str]], about: About | None, now: float | None = None) -> str:
    now = time.time() if now is None else now
    parts = [
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>cann-exporter</title></head>\n<body>'
        f"<h1>cann-exporter {html.escape(version)}</h1>\n<p>Prometheus exporter for Huawei Ascend NPU nodes.</p>",
        "<h2>Endpoints</h2>",
        _table(("method", "path", "what"), [_endpoint(m, p) for m, p in endpoints]),
    ]
    if about is not None:
        parts += [
            "<h2>Collectors</h2>",
            _table(("collector", "state", "what runs"), [(c.name, "on" if c.on else "off", c.detail) for c in about.collectors]),
            "<h2>Sources</h2>",
            _table(("source", "state", "last success", "runs", "errors"), [_source(s, now) for s in about.sources]),
        ]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _endpoint(method: str, path: str) -> tuple[str, ...]:
    what = ENDPOINTS.get(path, "")
    link = f'<a href="{html.escape(path)}">{html.escape(path)}</a>' if method == "GET" else html.escape(path)
    return (method, _Raw(link), what)


def _source(status: SourceStatus, now: float) -> tuple[str, ...]:
    state = "not run yet" if status.runs == 0 else ("ok" if status.success else "failing")
    last = status.last_success_timestamp
    when = "never" if last is None else (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last)) + f" ({max(0.0, now - last):.0f} s ago)")
    errors = ", ".join(f"{reason} {count}" for reason, count in sorted(status.errors.items())) or "none"
    return (status.name, state, when, str(status.runs), errors)


class _Raw(str):
    """Cell text that is already HTML."""


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    def cell(value: str) -> str:
        return value if isinstance(value, _Raw) else html.escape(value)

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>\n" for row in rows)
    return f'<table border="1" cellpadding="4"><tr>{head}</tr>\n{body}</table>'
