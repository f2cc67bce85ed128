"""Certificates, web config files and an in-process TLS exporter app for the web config tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import bcrypt
import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.ingest import IngestStore
from exporter.sampler import SnapshotStore
from exporter.server import create_app
from exporter.webconfig import WebSecurity
from tests.webconfig.certs import Authority, Issued, make_ca

PASSWORD = "s3cret-pass"
# Cost 4 keeps the suite fast; the timing test makes its own, costlier hashes.
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Authority
    server: Issued
    client: Issued
    expired_client: Issued
    expired_server: Issued
    other_ca: Authority
    foreign_client: Issued       # issued by other_ca: not trusted by the exporter

    def client_context(self, client: Issued | None = None, *, max_version: ssl.TLSVersion | None = None,
                       ca: Path | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca or self.ca.cert))
        if max_version is not None:
            ctx.maximum_version = max_version
        if client is not None:
            ctx.load_cert_chain(client.cert, client.key)
        return ctx


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca(d, "test-ca"), make_ca(d, "other-ca")
    return Pki(
        d, ca,
        ca.issue(d, "server", server=True),
        ca.issue(d, "client", server=False, sans=("prometheus.example", "10.0.0.1")),
        ca.issue(d, "expired-client", server=False, expired=True),
        ca.issue(d, "expired-server", server=True, expired=True),
        other, other.issue(d, "foreign-client", server=False),
    )


def write_web_config(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def tls_doc(pki: Pki, **tls: object) -> dict:
    return {"tls_server_config": {"cert_file": str(pki.server.cert), "key_file": str(pki.server.key), **tls}}


@dataclass
class Running:
    url: str
    security: WebSecurity
    ingest: IngestStore

    async def get(self, path: str, ctx: ssl.SSLContext | None, auth: tuple[str, str] | None = None,
                  headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        headers = {**basic(auth), **(headers or {})}
        async with aiohttp.ClientSession() as session:
            async with session.get(self.url + path, ssl=ctx if ctx is not None else False, headers=headers) as resp:
                return resp.status, await resp.text(), dict(resp.headers)

    async def handshake(self, ctx: ssl.SSLContext) -> ssl.SSLObject:
        """Connect, complete the TLS handshake, and hand back the session's SSLObject."""
        host, port = self.url.removeprefix("https://").rsplit(":", 1)
        _, writer = await asyncio.open_connection(host, int(port), ssl=ctx)
        try:
            return writer.get_extra_info("ssl_object")
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()


def basic(auth: tuple[str, str] | None) -> dict[str, str]:
    if auth is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()}


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    """Start the exporter app on 127.0.0.1 with a web config file, TLS as the file says."""
    runners: list[web.AppRunner] = []

    async def start(config: Path, *, ingest_token: str | None = None, exempt_health: bool = True) -> Running:
        security = WebSecurity.from_file(
            config, exempt_paths=frozenset({"/healthz", "/readyz"}) if exempt_health else frozenset(), poll_interval=0.05,
        )
        registry, ingest = CollectorRegistry(), IngestStore()
        registry.register(security)
        app = create_app(registry, SnapshotStore(), ingest=ingest, ingest_token=ingest_token, web_security=security)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=security.ssl_context)
        await site.start()
        port = runner.addresses[0][1]
        scheme = "https" if security.ssl_context else "http"
        return Running(f"{scheme}://127.0.0.1:{port}", security, ingest)

    yield start
    for runner in runners:
        await runner.cleanup()
