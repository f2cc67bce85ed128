"""Web config files, certificates and a client for the in-process TLS exporter app."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import bcrypt
import yaml

from exporter.jobs.store import IngestStore
from exporter.node.publisher import Publisher
from exporter.web.security import WebSecurity
from tests.support.certs import Authority, Issued

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
    foreign_client: Issued  # issued by other_ca: not trusted by the exporter

    def client_context(
        self, client: Issued | None = None, *, max_version: ssl.TLSVersion | None = None, ca: Path | None = None
    ) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca or self.ca.cert))
        if max_version is not None:
            ctx.maximum_version = max_version
        if client is not None:
            ctx.load_cert_chain(client.cert, client.key)
        return ctx


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
    publisher: Publisher | None = None  # the app's: a scrape of /metrics finds the live parts as they are now

    async def get(
        self, path: str, ctx: ssl.SSLContext | None, auth: tuple[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, dict[str, str]]:
        headers = {**basic(auth), **(headers or {})}
        if path == "/metrics" and self.publisher is not None:
            await self.publisher.swap()
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
