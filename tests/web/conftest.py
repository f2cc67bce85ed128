"""Certificates, web config files and an in-process TLS exporter app for the web config tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from exporter.jobs.store import IngestStore
from exporter.web.security import WebSecurity
from tests.support.apps import PUBLISHER, ingest_app
from tests.support.certs import make_ca
from tests.support.webconfig import Pki, Running


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca(d, "test-ca"), make_ca(d, "other-ca")
    return Pki(
        d,
        ca,
        ca.issue(d, "server", server=True),
        ca.issue(d, "client", server=False, sans=("prometheus.example", "10.0.0.1")),
        ca.issue(d, "expired-client", server=False, expired=True),
        ca.issue(d, "expired-server", server=True, expired=True),
        other,
        other.issue(d, "foreign-client", server=False),
    )


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    """Start the exporter app on 127.0.0.1 with a web config file, TLS as the file says."""
    runners: list[web.AppRunner] = []

    async def start(config: Path, *, ingest_token: str | None = None, exempt_health: bool = True) -> Running:
        security = WebSecurity.from_file(
            config,
            exempt_paths=frozenset({"/healthz", "/readyz"}) if exempt_health else frozenset(),
            poll_interval=0.05,
        )
        ingest = IngestStore()
        app = ingest_app(ingest, ingest_token, security)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=security.ssl_context)
        await site.start()
        port = runner.addresses[0][1]
        scheme = "https" if security.ssl_context else "http"
        return Running(f"{scheme}://127.0.0.1:{port}", security, ingest, app[PUBLISHER])

    yield start
    for runner in runners:
        await runner.cleanup()
