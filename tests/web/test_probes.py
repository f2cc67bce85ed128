"""Health probes answered by the connection (web/probes.py), in-process on 127.0.0.1 through
HttpServer.serve and the app `serve` builds: the answers equal the routes', anything that is not
a plain probe goes to aiohttp, pipelined and split probes are answered in order, and a client
that pipelines probes without reading is held to a bounded buffer and dropped. Every wait is
bounded."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import bcrypt
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from exporter.web.app import create_app
from exporter.web.options import WebOptions
from exporter.web.probes import PROBES, Probes
from exporter.web.security import WebSecurity
from exporter.web.server import HttpServer
from tests.support.rawhttp import BOUND, closed_by_server, connect, serve_app, until
from tests.support.webconfig import write_web_config

PROBE = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:9101\r\nUser-Agent: kube-probe/1.29\r\nAccept: */*\r\n"


@dataclass
class Served:
    server: HttpServer
    port: int
    app: web.Application
    ready: list[bool]

    @property
    def probes(self) -> Probes:
        return self.app[PROBES]

    async def exchange(self, raw: bytes, *, rcvbuf: int | None = None) -> bytes:
        """Send ``raw`` on a new connection and read until the server closes it."""
        reader, writer = await self.connect(rcvbuf)
        writer.write(raw)
        received = await closed_by_server(reader)
        writer.close()
        return received

    async def connect(self, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await connect(self.port, rcvbuf)


@asynccontextmanager
async def serving(options: WebOptions = WebOptions(), security: WebSecurity | None = None) -> AsyncIterator[Served]:
    ready = [False]
    app = create_app(CollectorRegistry(), lambda: ready[0], security=security)
    async with serve_app(app, options) as (server, port):
        yield Served(server, port, app, ready)


def answers(raw: bytes) -> list[tuple[bytes, dict[bytes, bytes], bytes]]:
    """(status line, headers without Date, body) of every response in ``raw``, in order."""
    out = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status, *lines = head.split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines)}
        length = int(headers[b"content-length"])
        body, raw = raw[:length], raw[length:]
        headers.pop(b"date", None)
        out.append((status, headers, body))
    return out


def close(head: bytes) -> bytes:
    return head + b"Connection: close\r\n\r\n"


async def test_a_probe_is_answered_by_its_connection_as_the_route_would_answer_it():
    async with serving() as served:
        for path in (b"/healthz", b"/readyz"):
            for ready in (False, True):
                served.ready[0] = ready
                before = served.probes.answered
                direct = await served.exchange(close(PROBE.replace(b"/healthz", path)))
                assert served.probes.answered == before + 1
                # The same request with an (empty) query string is not a plain probe: aiohttp answers it.
                routed = await served.exchange(close(PROBE.replace(b"/healthz", path + b"?")))
                assert served.probes.answered == before + 1
                assert answers(direct) == answers(routed), (path, ready)
        status, headers, body = answers(direct)[0]
        assert (status, body) == (b"HTTP/1.1 200 OK", b"ready\n")
        assert headers[b"server"] == b"cann-exporter" and headers[b"connection"] == b"close"
        assert served.probes.answered == 4


async def test_not_ready_is_503_and_http_1_0_is_answered_in_kind():
    async with serving() as served:
        status, headers, body = answers(await served.exchange(b"GET /readyz HTTP/1.0\r\n\r\n"))[0]
        assert (status, body) == (b"HTTP/1.0 503 Service Unavailable", b"waiting for the first sample\n")
        assert headers[b"connection"] == b"close"
        assert served.probes.answered == 1


async def test_kept_alive_and_pipelined_probes_are_answered_in_order_then_aiohttp_takes_over():
    async with serving() as served:
        served.ready[0] = True
        burst = (PROBE + b"\r\n") * 300 + b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n" + close(b"GET /metrics HTTP/1.1\r\nHost: t\r\n")
        got = answers(await served.exchange(burst))
        assert [a[2] for a in got[:301]] == [b"ok\n"] * 300 + [b"ready\n"]
        assert got[-1][0] == b"HTTP/1.1 200 OK" and got[-1][1][b"content-type"].startswith(b"text/plain; version=0.0.4")
        assert len(got) == 302 and served.probes.answered == 301       # /metrics went through aiohttp


async def test_a_probe_arriving_a_byte_at_a_time_is_answered():
    async with serving() as served:
        reader, writer = await served.connect()
        for byte in close(PROBE):
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0)
        received = await asyncio.wait_for(reader.read(), BOUND)
        writer.close()
        assert answers(received)[0][2] == b"ok\n" and served.probes.answered == 1


@pytest.mark.parametrize("raw, status", [
    (close(b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n"), b"405"),
    (b"GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", b"200"),
    (close(b"GET /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n", b"200"),
    (close(b"GET /healthz HTTP/1.1\r\nHost: t\r\nBad header\r\n"), b"400"),
    (close(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n"), b"400"),
    (close(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: \x01\r\n"), b"400"),
    (close(b"GET /healthz HTTP/2.0\r\nHost: t\r\n"), b"200"),
    (close(b"HEAD /healthz HTTP/1.1\r\nHost: t\r\n"), b"200"),
    (close(b"GET /healthz/ HTTP/1.1\r\nHost: t\r\n"), b"404"),
    (close(b"GET /healthzz HTTP/1.1\r\nHost: t\r\n"), b"404"),
])
async def test_anything_but_a_plain_probe_is_aiohttp_s_to_answer(raw: bytes, status: bytes):
    async with serving() as served:
        received = await served.exchange(raw)
        assert received.split(b" ", 2)[1] == status, received[:200]
        assert served.probes.answered == 0


async def test_a_probe_after_another_request_on_the_same_connection_goes_to_aiohttp():
    async with serving() as served:
        got = answers(await served.exchange(b"GET /healthz? HTTP/1.1\r\nHost: t\r\n\r\n" + close(PROBE)))
        assert [a[2] for a in got] == [b"ok\n", b"ok\n"] and served.probes.answered == 0


async def test_a_guarded_health_route_is_left_to_basic_auth_and_an_exempt_one_carries_the_config_headers(tmp_path):
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(4)).decode()
    doc = {"basic_auth_users": {"prometheus": hashed}, "http_server_config": {"headers": {"X-Frame-Options": "deny"}}}
    config = write_web_config(tmp_path / "web.yml", doc)
    guarded = WebSecurity.from_file(config)
    try:
        async with serving(security=guarded) as served:
            assert (await served.exchange(close(PROBE))).startswith(b"HTTP/1.1 401")
            assert served.probes.answered == 0
    finally:
        guarded.close()
    exempt = WebSecurity.from_file(config, exempt_paths=frozenset({"/healthz", "/readyz"}))
    try:
        async with serving(security=exempt) as served:
            direct = answers(await served.exchange(close(PROBE)))
            routed = answers(await served.exchange(close(PROBE.replace(b"/healthz", b"/healthz?"))))
            assert direct == routed and direct[0][1][b"x-frame-options"] == b"deny"
            assert served.probes.answered == 1
    finally:
        exempt.close()


async def test_a_client_pipelining_probes_without_reading_is_held_and_dropped():
    """Hundreds of thousands of probes sent, none read: the answers stop at the write buffer's
    bound, nothing more is read from the client, and the write deadline closes it."""
    options = WebOptions(write_timeout=0.5)
    async with serving(options) as served:
        reader, writer = await served.connect(rcvbuf=4096)
        sent = 0
        with pytest.raises((ConnectionResetError, BrokenPipeError, asyncio.TimeoutError)):
            while sent < 200_000:
                writer.write((PROBE + b"\r\n") * 1000)
                await asyncio.wait_for(writer.drain(), 2.0)    # blocks once the exporter stops reading
                sent += 1000
        assert sent < 200_000
        await until(lambda: served.server.table.open == 0, "the non-reading client dropped")
        assert served.server.table.timeouts["write"] == 1
        assert served.probes.answered < sent                   # far from every probe sent was answered
        writer.transport.abort()


def connect_and_send(port: int, raw: bytes) -> socket.socket:
    """Connect and send without yielding to the event loop: when the server accepts, the whole
    request is already waiting in the socket."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
    sock.sendall(raw)
    sock.setblocking(False)
    return sock


async def until_closed(sock: socket.socket) -> bytes:
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        return await closed_by_server(reader)
    finally:
        writer.close()


async def test_a_closing_probe_waiting_at_accept_is_answered_even_when_every_slot_is_taken():
    """The kubelet's probe (Connection: close, sent with the connection) is answered in the
    callback that accepts it, before the connection cap: with the regular and the health slot
    held by clients that are never evictable (the table's clock frozen), it still gets its 200,
    while a scrape, and a probe that asks to keep its connection, are closed unanswered."""
    async with serving(WebOptions(max_connections=1, health_connections=1)) as served:
        served.server.table.clock = lambda: float("-inf")    # nobody has ever waited long enough
        holders = [await served.connect() for _ in range(2)]
        await until(lambda: served.server.table.open == 2, "both holders admitted")
        answered = await until_closed(connect_and_send(served.port, close(PROBE)))
        assert answers(answered)[0][:1] == (b"HTTP/1.1 200 OK",) and answers(answered)[0][2] == b"ok\n"
        assert answered.endswith(b"ok\n") and served.probes.answered == 1
        assert served.server.table.rejected["full"] == 0 and served.server.table.open == 2
        for refused in (close(b"GET /metrics HTTP/1.1\r\nHost: t\r\n"), PROBE + b"\r\n"):
            assert await until_closed(connect_and_send(served.port, refused)) == b""
        assert served.server.table.rejected["full"] == 2 and served.probes.answered == 1
        for _, writer in holders:
            writer.close()


async def test_a_probe_answered_at_accept_equals_the_route_s_answer():
    async with serving() as served:
        for ready in (False, True):
            served.ready[0] = ready
            for path in (b"/healthz", b"/readyz"):
                at_accept = await until_closed(connect_and_send(served.port, close(PROBE.replace(b"/healthz", path))))
                routed = await served.exchange(close(PROBE.replace(b"/healthz", path + b"?")))
                assert answers(at_accept) == answers(routed), (path, ready)
        assert served.probes.answered == 4 and served.server.table.open == 0
