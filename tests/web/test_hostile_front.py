"""The front door under attack: every attack of the hostile-input list against the listener,
each asserting that the event loop is never held past 100 ms (CPU-time based, looplag), that
what is refused is counted, and that good /metrics and /healthz are still served.

In-process: the app `serve` builds (create_app) behind HttpServer.serve on 127.0.0.1, driven
with raw sockets. Memory: a real `serve --simulate` process, its VmRSS read from
/proc/<pid>/status before, during and after the attack. Clients bind distinct loopback source
addresses (127.0.0.x) where the attack is per address. Every loop is bounded.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import socket
import ssl
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge

from exporter.web.app import create_app
from exporter.web.options import WebOptions
from exporter.web.server import HttpServer
from tests.support.exposition import value
from tests.support.looplag import measure
from tests.support.rawhttp import BOUND, closed_by_server, serve_app, until
from tests.support.serve import Exporter
from tests.support.webconfig import Pki

GOOD = "front_test_good_metric"
UNLIMITED_RATE = WebOptions(new_connections_per_second=1 << 20, new_connections_burst=1 << 20)


def app() -> web.Application:
    registry = CollectorRegistry()
    Gauge(GOOD, "served whatever the attack", registry=registry).set(1)

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    return create_app(registry, lambda: True, routes=[web.post("/echo", echo)])


@asynccontextmanager
async def serving(options: WebOptions | None = None, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[tuple[HttpServer, int]]:
    async with serve_app(app(), options or WebOptions(), ssl_context) as served:
        yield served


async def open_from(port: int, source: str = "127.0.0.1") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), BOUND)
    return await asyncio.open_connection(sock=sock)


async def exchange(port: int, data: bytes, source: str = "127.0.0.1") -> bytes:
    """``data`` sent on a new connection; everything answered until the server closes."""
    reader, writer = await open_from(port, source)
    writer.write(data)
    try:
        return await closed_by_server(reader)
    finally:
        writer.close()


def get(path: str, *headers: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: t", *headers, "Connection: close", "", ""]).encode()


async def still_good(port: int) -> None:
    metrics = await exchange(port, get("/metrics"))
    assert metrics.startswith(b"HTTP/1.1 200") and f"\n{GOOD} 1.0".encode() in metrics
    assert (await exchange(port, get("/healthz"))).startswith(b"HTTP/1.1 200")


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


# --- what a plain HTTP/1.1 server refuses --------------------------------------------------------

REFUSED = {
    "bare_lf": b"GET /healthz HTTP/1.1\nHost: t\n\n",
    "9k_header_line": b"GET /healthz HTTP/1.1\r\nHost: t\r\nX: " + b"a" * 9000 + b"\r\n\r\n",
    "http11_without_host": b"GET /healthz HTTP/1.1\r\n\r\n",
    "content_length_abc": b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n",
    "two_content_lengths": b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    "not_http": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\0" * 64 + b"\r\n\r\n",
    "nul_in_header": b"GET /healthz HTTP/1.1\r\nHost: t\r\nX: a\0b\r\n\r\n",
    # Issue 45: aiohttp's parser takes these; answered `HTTP/0.9 200 OK` and 200 before.
    "no_http_version": b"GET /healthz\r\n\r\n",
    "absolute_uri": b"GET http://t/metrics HTTP/1.1\r\nHost: t\r\n\r\n",
    "authority_form": b"CONNECT t:443 HTTP/1.1\r\nHost: t\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_requests_a_plain_http_server_refuses_get_400_with_our_server_header(name: str) -> None:
    async with serving() as (server, port), measure() as lag:
        answer = await exchange(port, REFUSED[name])
        assert status_of(answer) == 400, answer[:200]
        head = answer.partition(b"\r\n\r\n")[0].lower()
        assert b"server: cann-exporter" in head and b"aiohttp" not in answer and b"python" not in answer
        assert dict(server.status().request_errors)["bad_request"] == 1
        await still_good(port)
    lag.assert_never_held()


async def test_a_probe_stalled_then_60000_spaces_never_holds_the_loop() -> None:
    """The attack that held the loop 12-20 s through the old probe parser's regex."""
    async with serving() as (_, port), measure() as lag:
        reader, writer = await open_from(port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX: a")
        await asyncio.sleep(0.2)
        await still_good(port)  # others served while it waits
        writer.write(b" " * 60_000 + b"\r\n\r\n")
        answer = await closed_by_server(reader)
        writer.close()
        assert status_of(answer) == 400  # over aiohttp's header line limit
        await still_good(port)
    lag.assert_never_held()


async def test_connection_close_then_keep_alive_closes() -> None:
    async with serving() as (_, port):
        reader, writer = await open_from(port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n")
        answer = await closed_by_server(reader)  # fails if the server keeps it open
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200")


async def test_health_probes_go_through_the_middleware_with_the_server_header() -> None:
    async with serving() as (_, port):
        for path in ("/healthz", "/readyz"):
            answer = await exchange(port, get(path))
            assert answer.startswith(b"HTTP/1.1 200") and b"Server: cann-exporter" in answer


async def test_a_content_length_abc_flood_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Thousands of malformed requests: one warning line for the address, with no traceback."""
    flood = 2000
    with caplog.at_level(logging.DEBUG):
        async with serving(UNLIMITED_RATE) as (server, port), measure() as lag:
            for start in range(0, flood, 50):  # 50 connections at a time, bounded
                await asyncio.gather(*(exchange(port, REFUSED["content_length_abc"]) for _ in range(min(50, flood - start))))
            assert dict(server.status().request_errors)["bad_request"] == flood
            await still_good(port)
        lag.assert_never_held()
    ours = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(ours) == 1 and ours[0].name == "exporter.web" and ours[0].exc_info is None, [r.getMessage() for r in ours]
    assert not [r for r in caplog.records if r.exc_info]


# --- bodies --------------------------------------------------------------------------------------


def post(body: bytes, *headers: str, length: int | None = None) -> bytes:
    head = [
        "POST /echo HTTP/1.1",
        "Host: t",
        f"Content-Length: {len(body) if length is None else length}",
        *headers,
        "Connection: close",
        "",
        "",
    ]
    return "\r\n".join(head).encode() + body


@pytest.mark.parametrize(
    ("body", "encoding", "status", "reason"),
    [
        (b"not deflate at all", "deflate", 400, "bad_encoding"),
        (gzip.compress(b"data", mtime=0)[:10] + b"\xff" * 32, "gzip", 400, "bad_encoding"),  # mtime=0: the same test id in every process
        (b"plain", "br-x", 415, "unsupported_encoding"),
        (b"plain", "br", 415, "unsupported_encoding"),  # aiohttp's parser refuses it (no brotli): 415 all the same
        (b"plain", "zstd", 415, "unsupported_encoding"),
        (gzip.compress(b"\0" * (8 << 20)), "gzip", 413, "too_large"),  # 8 MiB inflated from 8 KiB
        (zlib.compress(b"{}" * (4 << 20)), "deflate", 413, "too_large"),
    ],
)
async def test_bad_compressed_bodies_are_refused_cleanly(
    body: bytes, encoding: str, status: int, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        async with serving() as (server, port), measure() as lag:
            answer = await exchange(port, post(body, f"Content-Encoding: {encoding}"))
            assert status_of(answer) == status, answer[:300]
            assert dict(server.status().request_errors)[reason] == 1
            await until(lambda: server.status().body_bytes_in_flight == 0)
            await still_good(port)
        lag.assert_never_held()
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_good_bodies_are_echoed_plain_and_compressed() -> None:
    async with serving() as (_, port):
        for data, headers in ((b"x" * 1000, ()), (gzip.compress(b"y" * 100_000), ("Content-Encoding: gzip",))):
            answer = await exchange(port, post(data, *headers))
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"x" * 1000 if not headers else b"y" * 100_000)


async def test_stalled_bodies_hold_no_more_than_the_budget() -> None:
    """Bodies announced at 1 MiB and stalled one byte short: the budget's worth get a handler,
    the rest 503 at once (unread); the budget comes back when they go; a good body then passes."""
    options = WebOptions(max_body_bytes_in_flight=4 << 20, body_timeout=30)
    async with serving(options) as (server, port), measure() as lag:
        held = []
        for i in range(40):
            reader, writer = await open_from(port, f"127.0.0.{2 + i % 4}")
            writer.write(post(b"x" * 1000, length=1 << 20))
            held.append((reader, writer))
        await until(lambda: dict(server.status().request_errors)["busy"] == 36, "36 bodies refused as busy")
        status = server.status()
        assert status.body_bytes_in_flight == 4 << 20 and status.max_body_bytes_in_flight == 4 << 20
        refused = await closed_by_server(held[-1][0])
        assert status_of(refused) == 503 and b"Retry-After: 1" in refused
        too_big = await exchange(port, post(b"", length=(1 << 20) + 1))
        assert status_of(too_big) == 413
        await still_good(port)
        for _, writer in held:
            writer.close()
        await until(lambda: server.status().body_bytes_in_flight == 0, "the budget given back")
        assert (await exchange(port, post(b"z" * 5000))).endswith(b"z" * 5000)
    lag.assert_never_held()


# --- TLS and churn -------------------------------------------------------------------------------


def server_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    return context


async def tls_get(port: int, pki: Pki, path: str) -> bytes:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=pki.client_context(), server_hostname="localhost"), BOUND
    )
    writer.write(get(path))
    try:
        return await closed_by_server(reader)
    finally:
        writer.close()


async def test_silent_tls_connections_start_no_handshake_and_handshakes_are_capped(pki: Pki) -> None:
    """Silent connections start no handshake; one address runs a quarter of the handshakes at
    most (its others wait their turn), so another address's handshake starts at once."""
    options = WebOptions(header_timeout=1.0, max_tls_handshakes=8)
    async with serving(options, server_context(pki)) as (server, port), measure() as lag:
        silent = [await open_from(port, f"127.0.0.{2 + i % 4}") for i in range(100)]
        await until(lambda: server.table.open == 100)
        assert server.front is not None and server.front.gate.running == 0  # none started: nothing sent
        stalled = [await open_from(port, "127.0.0.9") for _ in range(4)]
        for _, writer in stalled:
            writer.write(b"\x16")  # a first byte, then nothing
        await until(lambda: server.front is not None and server.front.gate.held("127.0.0.9") == 2, "the address's share reached")
        answer = await tls_get(port, pki, "/metrics")  # another address: started at once, served
        assert answer.startswith(b"HTTP/1.1 200") and GOOD.encode() in answer
        assert server.front.gate.held("127.0.0.9") == 2 and server.front.gate.running <= 3
        await until(lambda: server.table.open == 0, "the header deadline closed them all")
        for _, writer in [*silent, *stalled]:
            writer.close()
        assert server.table.timeouts["header"] == 104
    lag.assert_never_held()


async def test_connection_churn_is_rate_limited_and_never_starves_the_scraper() -> None:
    options = WebOptions(new_connections_per_second=50, new_connections_burst=100, max_connections=32, health_connections=2)
    async with serving(options) as (server, port), measure() as lag:
        scraper_reader, scraper = await open_from(port)  # a keep-alive scraper
        churn: list[asyncio.StreamWriter] = []
        scrapes = lobbied = 0
        assert server.front is not None
        for _ in range(8):  # 8 rounds of 60 new connections
            for _ in range(60):
                try:
                    churn.append((await open_from(port, "127.0.0.7"))[1])
                except OSError:
                    pass
            lobbied = max(lobbied, len(server.front.lobby))  # silent past the cap: waiting, no slot
            scraper.write(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
            head = await asyncio.wait_for(scraper_reader.readuntil(b"\r\n\r\n"), BOUND)
            length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")).split(b":")[1])
            body = await asyncio.wait_for(scraper_reader.readexactly(length), BOUND)
            assert head.startswith(b"HTTP/1.1 200") and GOOD.encode() in body
            scrapes += 1
            for writer in churn:
                writer.close()
            churn.clear()
        rejected = dict(server.status().rejected)
        assert scrapes == 8 and rejected["rate_limited"] > 0 and lobbied > 0
        assert (await exchange(port, get("/healthz"))).startswith(b"HTTP/1.1 200")
        scraper.close()
    lag.assert_never_held()


# --- memory: a real `serve --simulate` ------------------------------------------------------------

MiB = 1 << 20


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def stall_bodies(port: int, count: int, extra: str = "") -> list[socket.socket]:
    """``count`` unauthenticated POST /api/v1/steps announcing 1 MiB, all but one byte sent
    (``extra``: more header lines)."""
    held = []
    for i in range(count):
        sock = socket.socket()
        sock.bind((f"127.0.0.{2 + i % 8}", 0))
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        head = f"POST /api/v1/steps HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {MiB}\r\n{extra}\r\n".encode()
        sent, chunk = 0, head + b"[" + b" " * (MiB - 2)
        end = time.monotonic() + BOUND
        while sent < len(chunk) and time.monotonic() < end:
            try:
                sent += sock.send(chunk[sent:])
            except BlockingIOError:
                time.sleep(0.001)  # its window is full: the exporter is not reading (as it should)
                if sent > len(head):
                    break
            except (BrokenPipeError, ConnectionResetError):
                break  # the exporter refused the request and closed: nothing more is read
        held.append(sock)
    return held


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("extra", "reason"), [("", "busy"), ("Content-Length: 0\r\n", "bad_request")], ids=["stalled", "malformed_then_1_MiB"]
)
def test_stalled_bodies_keep_rss_under_budget_and_it_comes_back(tmp_path: Path, extra: str, reason: str) -> None:
    """Bodies held one byte short (the budget answers 503), and bodies behind a request the
    parser refuses (nothing more is read from that connection)."""
    exporter = Exporter(["--simulate", "healthy", "--npu-smi.details="], tmp_path)
    try:
        exporter.wait_for(lambda found: True)
        pid = exporter.proc.pid
        baseline = rss(pid)
        held = stall_bodies(exporter.port, 220, extra)
        time.sleep(1.0)
        peak = rss(pid)
        found = exporter.metrics()
        assert (value(found, "cann_exporter_http_request_errors_total", reason=reason) or 0) > 0
        assert (value(found, "cann_exporter_http_body_bytes_in_flight") or 0) <= 16 * MiB
        for sock in held:
            sock.close()
        exporter.wait_for(
            lambda f: value(f, "cann_exporter_http_body_bytes_in_flight") == 0 and (value(f, "cann_exporter_http_connections") or 0) <= 1
        )
        time.sleep(2.0)  # the trim after the burst
        after = rss(pid)
        assert peak < 200 * MiB, f"RSS {peak / MiB:.0f} MiB under stalled bodies (baseline {baseline / MiB:.0f})"
        assert after < baseline + 24 * MiB, f"RSS {after / MiB:.0f} MiB after (baseline {baseline / MiB:.0f}, peak {peak / MiB:.0f})"
        assert exporter.get("/healthz")[0] == 200
    finally:
        exporter.stop()


@pytest.mark.e2e
def test_silent_tls_connections_cost_little_and_rss_comes_back(tmp_path: Path, pki: Pki) -> None:
    config = tmp_path / "web.yml"
    config.write_text(f"tls_server_config:\n  cert_file: {pki.server.cert}\n  key_file: {pki.server.key}\n")
    exporter = Exporter(["--simulate", "healthy", "--npu-smi.details=", "--web.config.file", str(config)], tmp_path)
    try:
        port = exporter.port  # logged once listening
        time.sleep(2.0)  # the first samples taken
        baseline = rss(exporter.proc.pid)
        held = []
        for i in range(264):
            sock = socket.socket()
            sock.bind((f"127.0.0.{2 + i % 8}", 0))
            sock.connect(("127.0.0.1", port))
            if i % 2:
                sock.send(b"\x16\x03\x01")  # half start a ClientHello and stall
            held.append(sock)
        time.sleep(1.5)
        during = rss(exporter.proc.pid)
        for sock in held:
            sock.close()
        time.sleep(3.0)
        after = rss(exporter.proc.pid)
        assert during < baseline + 48 * MiB, f"{(during - baseline) / MiB:.0f} MiB for 264 silent TLS connections"
        assert after < baseline + 24 * MiB, f"RSS {after / MiB:.0f} MiB after (baseline {baseline / MiB:.0f}, during {during / MiB:.0f})"
        context = pki.client_context()
        with (
            socket.create_connection(("127.0.0.1", port), timeout=BOUND) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.sendall(get("/healthz"))
            assert tls.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        exporter.stop()
