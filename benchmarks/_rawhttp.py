"""A minimal asyncio HTTP/1.1 client for the abuse benchmark: one connection per object, from a
chosen loopback source address, requests written as bytes, responses read to their last byte
(Content-Length, chunked, or until close). Small and predictable: hundreds of them run in one
event loop without a client library's pools, retries or decompression in the way.

Every await here has a deadline (``timeout``); a failure closes the connection and the next
request opens a new one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Mapping

HOST = "127.0.0.1"


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def request_bytes(method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of one response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            parts.append(await reader.readexactly(size + 2))
            if size == 0:
                break
        body = b"".join(p[:-2] for p in parts)
    elif status in (204, 304) or 100 <= status < 200:
        body = b""
    else:
        body = await reader.read()
    return status, headers, body


class Connection:
    """One keep-alive connection to 127.0.0.1:port from ``source`` (a loopback address)."""

    def __init__(self, port: int, source: str | None = None, timeout: float = 10.0) -> None:
        self.port, self.source, self.timeout = port, source, timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connects = 0

    async def _open(self) -> None:
        local = (self.source, 0) if self.source else None
        self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=local), self.timeout)
        self.connects += 1

    async def request(self, raw: bytes) -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body, seconds from writing the request to the body's last byte);
        raises OSError, asyncio.TimeoutError or asyncio.IncompleteReadError on failure."""
        start = time.perf_counter()
        try:
            if self.writer is None:
                await self._open()
            assert self.reader is not None and self.writer is not None
            self.writer.write(raw)
            status, headers, body = await asyncio.wait_for(read_response(self.reader), self.timeout)
        except BaseException:
            self.close()
            raise
        elapsed = time.perf_counter() - start
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body, elapsed

    def close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.transport.abort()
        self.reader = self.writer = None
