"""The listener's bounds, in-process on 127.0.0.1: header, body, idle and write deadlines, the
connection cap with its health slots, and the table that decides admission.

Each test serves a small app through HttpServer.serve (what `serve` runs) with tiny timeouts,
drives it with raw sockets, and asserts what the client sees and what was counted. Every wait
is bounded.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
from aiohttp import web

from exporter.app.settings import ConfigError, build_settings
from exporter.web import guard, limits
from exporter.web.limits import ConnectionTable, Pool
from exporter.web.lobby import Lobby
from exporter.web.middleware import install
from exporter.web.options import WebOptions
from exporter.web.security import WebSecurity
from exporter.web.server import HttpServer
from tests.support.rawhttp import BOUND, closed_by_server, connect, serve_app, until
from tests.support.webconfig import HASH, PASSWORD, Pki, basic, write_web_config

BIG = b"x" * (4 << 20)  # a response no socket buffer of a non-reading client holds
REACHED = web.AppKey("reached", asyncio.Event)  # set when /slow's handler runs
FAST = WebOptions(header_timeout=0.3, body_timeout=0.3, idle_timeout=0.3, write_timeout=0.3)


def small_app() -> web.Application:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=BIG)

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def slow(request: web.Request) -> web.Response:
        request.app[REACHED].set()
        await asyncio.sleep(BOUND)
        return web.Response(text="late\n")

    app = web.Application()
    app[REACHED] = asyncio.Event()
    app.router.add_get("/healthz", ok)
    app.router.add_get("/readyz", ok)
    app.router.add_get("/big", big)
    app.router.add_post("/echo", echo)
    app.router.add_get("/slow", slow)
    return app


@dataclass
class Served:
    server: HttpServer
    port: int
    app: web.Application

    async def connect(self, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await connect(self.port, rcvbuf)

    async def until(self, condition: Callable[[], bool]) -> None:
        await until(condition)

    async def spoken(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection that has sent the start of a request, then stalls: it holds a slot
        (one that has sent nothing waits in the lobby while every regular slot is taken)."""
        reader, writer = await self.connect()
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        return reader, writer


@asynccontextmanager
async def serving(options: WebOptions, ssl_context: ssl.SSLContext | None = None) -> AsyncIterator[Served]:
    app = small_app()
    async with serve_app(app, options, ssl_context) as (server, port):
        yield Served(server, port, app)


async def request(served: Served, path: str) -> bytes:
    reader, writer = await served.connect()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    answer = await closed_by_server(reader)
    writer.close()
    return answer


# --- deadlines -------------------------------------------------------------------------------------


async def test_half_sent_headers_are_closed_by_the_header_timeout():
    async with serving(FAST) as served:
        reader, writer = await served.connect()
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")  # slowloris: never finishes
        assert await closed_by_server(reader) == b""
        assert served.server.table.timeouts["header"] == 1
        await served.until(lambda: served.server.table.open == 0)


async def test_a_connection_that_sends_nothing_is_closed_by_the_header_timeout():
    async with serving(FAST) as served:
        reader, _ = await served.connect()
        assert await closed_by_server(reader) == b""
        assert served.server.table.timeouts["header"] == 1


async def test_a_body_that_never_arrives_is_closed_by_the_body_timeout():
    async with serving(FAST) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nx")
        assert await closed_by_server(reader) == b""
        await served.until(lambda: served.server.table.open == 0)
        # The handler it cancelled ends after the close: no deadline is armed (or counted) again.
        await asyncio.sleep(3 * FAST.idle_timeout)
        assert served.server.table.timeouts == {"header": 0, "body": 1, "idle": 0, "write": 0}


async def test_a_complete_body_is_served():
    async with serving(FAST) as served:
        reader, writer = await served.connect()
        writer.write(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        assert (await closed_by_server(reader)).endswith(b"\r\n\r\nhello")
        assert sum(served.server.table.timeouts.values()) == 0


async def test_an_idle_keep_alive_connection_is_closed_by_the_idle_timeout():
    async with serving(FAST) as served:
        reader, writer = await served.connect()
        for _ in range(2):  # kept alive between requests, each answered
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert (await asyncio.wait_for(reader.readuntil(b"ok\n"), BOUND)).startswith(b"HTTP/1.1 200")
        assert await closed_by_server(reader) == b""
        assert served.server.table.timeouts == {"header": 0, "body": 0, "idle": 1, "write": 0}


async def test_a_client_that_does_not_read_is_dropped_and_its_buffers_freed():
    async with serving(FAST) as served:
        # A small receive window, many pipelined requests for a large body, nothing read.
        _, writer = await served.connect(rcvbuf=4096)
        writer.write(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n" * 20)
        await served.until(lambda: served.server.table.timeouts["write"] == 1)
        await served.until(lambda: served.server.table.open == 0)
        assert served.server.table.timeouts["idle"] == 0
        writer.close()


async def test_a_client_that_does_not_read_is_not_read_from_until_it_reads_again():
    async with serving(WebOptions(write_timeout=3 * BOUND)) as served:
        reader, writer = await served.connect(rcvbuf=4096)
        writer.write(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n" * 3)
        await served.until(lambda: served.server.table.open == 1)
        (conn,) = served.server.table.connections()
        # Stuck writing the first response: its pipelined requests stay in the kernel's buffers.
        await served.until(lambda: conn.transport is not None and not conn.transport.is_reading())
        # Reading again resumes it: every pipelined request is answered, none lost.
        received = b""
        while received.count(b"HTTP/1.1 200") < 3 or len(received) < 3 * len(BIG):
            received += await asyncio.wait_for(reader.read(1 << 20), BOUND)
        assert conn.transport.is_reading()
        assert served.server.table.timeouts["write"] == 0
        writer.close()


async def test_deadlines_leave_ordinary_requests_alone():
    async with serving(FAST) as served:
        for path in ("/healthz", "/big"):
            answer = await request(served, path)
            assert answer.startswith(b"HTTP/1.1 200")
        assert len(answer) > len(BIG)
        assert sum(served.server.table.timeouts.values()) == 0


async def test_tls_is_served_and_a_silent_handshake_is_closed_by_the_header_timeout(pki: Pki):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    async with serving(FAST, context) as served:
        reader, _ = await served.connect()  # TCP only: the handshake never starts
        assert await closed_by_server(reader) == b""
        assert served.server.table.timeouts["header"] == 1
        await served.until(lambda: served.server.table.open == 0)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", served.port, ssl=pki.client_context(), server_hostname="localhost"), BOUND
        )
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert (await closed_by_server(reader)).startswith(b"HTTP/1.1 200")
        writer.close()
        await served.until(lambda: served.server.table.open == 0)
        assert served.server.table.timeouts["header"] == 1


async def test_a_client_that_leaves_during_its_handler_is_no_timeout():
    async with serving(FAST) as served:
        reader, writer = await served.connect()
        writer.write(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
        await asyncio.wait_for(served.app[REACHED].wait(), BOUND)
        writer.close()
        await served.until(lambda: served.server.table.open == 0)
        await asyncio.sleep(3 * FAST.idle_timeout)  # the cancelled handler arms nothing afterwards
        assert sum(served.server.table.timeouts.values()) == 0


# --- the cap and the health slots --------------------------------------------------------------

CAPPED = WebOptions(max_connections=2, health_connections=1, header_timeout=30)


async def test_over_the_cap_only_health_is_answered():
    async with serving(CAPPED) as served:
        idle = [await served.spoken() for _ in range(2)]  # every regular slot, stalled
        await served.until(lambda: served.server.table.open == 2)
        refused = await request(served, "/big")  # the third: a health slot
        assert refused.startswith(b"HTTP/1.1 503")
        assert b"Connection: close" in refused or b"connection: close" in refused.lower()
        assert (await request(served, "/healthz")).startswith(b"HTTP/1.1 200")
        assert (await request(served, "/readyz")).startswith(b"HTTP/1.1 200")
        assert served.server.table.rejected["health_only"] == 1
        for _, writer in idle:
            writer.close()


async def test_a_connection_idle_past_the_grace_makes_room_for_a_probe(monkeypatch):
    monkeypatch.setattr(limits, "EVICT_AFTER", 0.2)
    async with serving(CAPPED) as served:
        held = [await served.spoken() for _ in range(3)]  # both regular slots and the health slot
        await served.until(lambda: served.server.table.open == 3)
        await asyncio.sleep(0.3)  # all three now stalled past the grace
        assert (await request(served, "/big")).startswith(b"HTTP/1.1 200")  # a full slot, not health-only
        assert served.server.table.rejected["evicted"] == 1
        assert await closed_by_server(held[0][0]) == b""  # the one that waited longest made room
        for _, writer in held:
            writer.close()


async def test_fresh_connections_never_push_out_a_probe_in_flight():
    async with serving(CAPPED) as served:  # the grace (1 s) is far off
        held = [await served.spoken() for _ in range(3)]
        await served.until(lambda: served.server.table.open == 3)
        refused = await served.spoken()  # everything taken, nothing old: closed at once
        assert await closed_by_server(refused[0]) == b""
        assert served.server.table.rejected == {"full": 1, "health_only": 0, "evicted": 0, "rate_limited": 0}
        for _, writer in [*held, refused]:
            writer.close()


async def test_silent_connections_renewed_within_the_grace_cannot_hold_the_health_slots(monkeypatch):
    """An attacker that keeps every connection younger than EVICT_AFTER, each stalled after a
    byte, fills the regular slots for good; the health slots still go to a probe, taken from a
    stalled holder."""
    monkeypatch.setattr(limits, "EVICT_AFTER", 3600.0)  # the regular slots stay taken
    async with serving(CAPPED) as served:
        held = [await served.spoken() for _ in range(3)]  # both regular slots and the health slot
        await served.until(lambda: served.server.table.open == 3)
        await asyncio.sleep(limits.HEALTH_EVICT_AFTER + 0.05)
        assert (await request(served, "/healthz")).startswith(b"HTTP/1.1 200")
        assert await closed_by_server(held[2][0]) == b""  # the silent health-slot holder
        assert served.server.table.rejected["evicted"] == 1
        for _, writer in held:
            writer.close()


async def test_a_request_waiting_at_accept_takes_the_place_of_a_young_silent_connection():
    """Silent connections renewed faster than any grace would hold every slot; a client whose
    request is in the socket when it is accepted (a probe) takes the place of the one silent
    longest, young as it is."""
    async with serving(CAPPED) as served:  # the grace (1 s) is far off
        held = [await served.connect() for _ in range(2)]  # both regular slots, silent
        await served.until(lambda: served.server.table.open == 2)
        # Blocking, in the loop's own thread: connected and sent before the server can accept.
        probe = socket.create_connection(("127.0.0.1", served.port), timeout=BOUND)
        probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        reader, writer = await asyncio.open_connection(sock=probe)
        assert (await closed_by_server(reader)).startswith(b"HTTP/1.1 200")  # a regular slot
        assert await closed_by_server(held[0][0]) == b""
        assert served.server.table.rejected == {"full": 0, "health_only": 0, "evicted": 1, "rate_limited": 0}
        assert served.server.table.open == 1 and not held[1][0].at_eof()  # the probe answered and gone
        for _, held_writer in [*held, (reader, writer)]:
            held_writer.close()


async def test_an_authenticated_scraper_between_scrapes_is_never_made_to_room(monkeypatch, tmp_path):
    """Past EVICT_AFTER an idle keep-alive connection makes room, unless a request on it passed
    basic auth: Prometheus keeps its connection between scrapes."""
    monkeypatch.setattr(limits, "EVICT_AFTER", 0.1)
    security = WebSecurity.from_file(write_web_config(tmp_path / "web.yml", {"basic_auth_users": {"prometheus": HASH}}))
    app = small_app()
    install(app, security)
    try:
        async with serve_app(app, CAPPED) as (server, port):
            scraper, anonymous = await connect(port), await connect(port)  # both regular slots
            for (reader, writer), headers in ((scraper, basic(("prometheus", PASSWORD))), (anonymous, {})):  # the scraper idles longest
                lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(f"GET /readyz HTTP/1.1\r\nHost: t\r\n{lines}\r\n".encode())
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
                assert head.startswith(b"HTTP/1.1 200" if headers else b"HTTP/1.1 401"), head
                length = next(line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))
                await reader.readexactly(int(length.split(b":")[1]))
            await asyncio.sleep(0.2)  # both idle past EVICT_AFTER
            newcomer = await connect(port)
            newcomer[1].write(b"GET /healthz HTTP/1.1\r\n")  # spoken: a slot is made for it
            await until(lambda: server.table.rejected["evicted"] == 1)
            assert await closed_by_server(anonymous[0]) == b"" and not scraper[0].at_eof()
            newcomer[1].close()
            for _, writer in (scraper, anonymous):
                writer.close()
    finally:
        security.close()


async def test_while_every_regular_slot_is_taken_a_silent_connection_waits_in_the_lobby():
    """It costs no slot; it is admitted once it speaks, else closed after LOBBY_WAIT (counted
    full); the lobby holds LOBBY_SIZE at most, the one waiting longest going first."""
    async with serving(CAPPED) as served:
        held = [await served.spoken() for _ in range(2)]  # both regular slots
        await served.until(lambda: served.server.table.open == 2)
        front = served.server.front
        assert front is not None
        front.lobby.size, front.lobby.wait = 2, 3.0
        waiting = [await served.connect() for _ in range(3)]
        await served.until(lambda: served.server.table.rejected["full"] == 1 and len(front.lobby) == 2)
        assert await closed_by_server(waiting[0][0]) == b""  # the oldest made room in the lobby
        assert served.server.table.open == 2  # no slot for any of them
        waiting[1][1].write(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert (await closed_by_server(waiting[1][0])).startswith(b"HTTP/1.1 200")  # spoke: admitted, served
        assert await closed_by_server(waiting[2][0]) == b""  # silent past LOBBY_WAIT
        assert len(front.lobby) == 0 and served.server.table.rejected["full"] == 2
        for _, writer in [*held, *waiting]:
            writer.close()


async def test_a_full_lobby_turns_over_the_sockets_of_the_address_holding_most():
    """A silent flood from one address pushes out its own oldest socket, never the one of a probe
    from another address that waits longer; the probe is admitted once it speaks."""
    admitted: list[str | None] = []
    refused: list[int] = []
    lobby = Lobby(asyncio.get_running_loop(), lambda sock, address: admitted.append(address), lambda: refused.append(1), size=3, wait=30)
    pairs = [socket.socketpair() for _ in range(5)]
    try:
        lobby.hold(pairs[0][0], "192.0.2.9")  # the probe, waiting longest
        for ours, _ in pairs[1:]:
            lobby.hold(ours, "192.0.2.1")  # the flood: its 1st, then its 2nd, make room
        assert pairs[1][0].fileno() == -1 and pairs[2][0].fileno() == -1
        assert pairs[0][0].fileno() != -1 and len(lobby) == 3 and len(refused) == 2
        pairs[0][1].send(b"G")
        await until(lambda: admitted == ["192.0.2.9"])
        assert len(lobby) == 2  # the probe left it
    finally:
        lobby.close()
        for ours, theirs in pairs:
            ours.close()
            theirs.close()


# --- the table, on its own ------------------------------------------------------------------------


@dataclass(eq=False)
class FakeSlot:
    since: float | None = 0.0  # None: in a handler
    evicted: bool = False
    address: str | None = "192.0.2.1"
    heard: bool = True
    answered: bool = False  # a request on it was answered

    def waiting_since(self) -> float | None:
        return self.since

    def silent(self) -> bool:
        return not self.heard

    def served(self) -> bool:
        return self.answered

    def evict(self) -> None:
        self.evicted = True


@pytest.mark.parametrize(
    ("first_bytes", "probe"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", True),
        (b"HEAD /readyz?verbose HTTP/1.1\r\n", True),
        (b"GET /healthzz HTTP/1.1\r\n", False),
        (b"GET /metrics HTTP/1.1\r\n", False),
        (b"POST /healthz HTTP/1.1\r\n", False),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", False),  # a TLS ClientHello
        (b"", False),
    ],
)
def test_a_probe_is_told_by_the_request_waiting_in_its_socket(first_bytes: bytes, probe: bool) -> None:
    ours, theirs = socket.socketpair()
    try:
        ours.setblocking(False)
        if first_bytes:
            theirs.sendall(first_bytes)
        assert guard._is_probe(ours) is probe
        if first_bytes:
            assert ours.recv(64, socket.MSG_PEEK) == first_bytes[:64]  # looked at, not read
    finally:
        ours.close()
        theirs.close()


def test_a_probe_takes_a_health_slot_from_a_connection_that_is_not_one():
    """Every slot young and taken, the health slots by newcomers that are not probes (they will
    be answered 503): a probe takes the place of the one held longest; a second probe, with
    only probes and young connections left, is refused."""
    now = [10.0]
    table = ConnectionTable(max_connections=1, health_connections=2, clock=lambda: now[0])
    regular, first, second = FakeSlot(since=10.0), FakeSlot(since=10.0), FakeSlot(since=10.0)
    assert [table.admit(regular, talking=True), table.admit(first, talking=True), table.admit(second, talking=True)] == [
        Pool.REGULAR,
        Pool.HEALTH,
        Pool.HEALTH,
    ]
    assert table.admit(FakeSlot(since=10.0), talking=True) is None  # not a probe: nothing to take
    probe = FakeSlot(since=10.0)
    assert table.admit(probe, talking=True, probe=True) is Pool.HEALTH
    assert first.evicted and not second.evicted and not regular.evicted
    other = FakeSlot(since=10.0)
    assert table.admit(other, talking=True, probe=True) is Pool.HEALTH and second.evicted
    assert table.admit(FakeSlot(since=10.0), talking=True, probe=True) is None  # probes keep theirs
    assert not probe.evicted and not other.evicted
    assert table.rejected == {"full": 2, "health_only": 0, "evicted": 2, "rate_limited": 0}


def test_the_table_admits_regular_then_evicts_the_longest_waiting_then_health_then_refuses():
    now = [10.0]
    table = ConnectionTable(max_connections=2, health_connections=1, clock=lambda: now[0])
    old, busy = FakeSlot(since=5.0), FakeSlot(since=None)
    assert [table.admit(old), table.admit(busy)] == [Pool.REGULAR, Pool.REGULAR]
    # Full: the one waiting longest (5 s > EVICT_AFTER) goes, its place taken by the newcomer.
    fresh = FakeSlot(since=10.0)
    assert table.admit(fresh, talking=True) is Pool.REGULAR and old.evicted and not busy.evicted
    # Nobody has waited past the grace: a health slot, then refused; a handler is never evicted.
    probe = FakeSlot(since=10.0)
    assert table.admit(probe, talking=True) is Pool.HEALTH
    assert table.admit(FakeSlot(since=10.0), talking=True) is None
    assert not any(s.evicted for s in (busy, fresh, probe))
    assert table.rejected == {"full": 1, "health_only": 0, "evicted": 1, "rate_limited": 0}
    assert table.open == 3
    # A silent health slot past its short grace goes to a newcomer, a regular one not yet.
    now[0] += limits.HEALTH_EVICT_AFTER
    taker = FakeSlot(since=now[0])
    assert table.admit(taker, talking=True) is Pool.HEALTH and probe.evicted and not fresh.evicted
    assert table.rejected == {"full": 1, "health_only": 0, "evicted": 2, "rate_limited": 0}
    now[0] += limits.EVICT_AFTER  # time passes: the newcomer that is still silent may go
    assert table.admit(FakeSlot(since=now[0]), talking=True) is Pool.REGULAR and fresh.evicted
    table.remove(busy)
    table.remove(busy)  # closing paths may report twice
    assert table.admit(FakeSlot()) is Pool.REGULAR and table.open == 3


def test_when_full_the_address_holding_the_most_makes_room_for_another():
    """Fair share: a flood from one address cannot push out a scraper from another, and the
    flooder's silent connection goes, not the scraper's idle keep-alive one."""
    now = [10.0]
    table = ConnectionTable(max_connections=3, health_connections=1, clock=lambda: now[0])
    scraper = FakeSlot(since=9.5, address="10.0.0.1")  # idle, but not past EVICT_AFTER
    flood = [FakeSlot(since=9.6 + i / 10, address="10.0.0.66") for i in range(2)]
    for slot in (scraper, *flood):
        assert table.admit(slot) is Pool.REGULAR
    newcomer = FakeSlot(since=now[0], address="10.0.0.2")
    assert table.admit(newcomer, talking=True) is Pool.REGULAR  # 2 > 0 + 1: the flooder's oldest went
    assert flood[0].evicted and not scraper.evicted and not flood[1].evicted
    # Shares now even (1 each): no fair-share victim, nobody past EVICT_AFTER: a health slot.
    assert table.admit(FakeSlot(since=now[0], address="10.0.0.3"), talking=True) is Pool.HEALTH


def test_a_talking_newcomer_takes_the_place_of_a_silent_connection_however_young():
    now = [10.0]
    table = ConnectionTable(max_connections=2, health_connections=1, clock=lambda: now[0])
    talked, silent, silent_in_health = FakeSlot(since=now[0]), FakeSlot(since=now[0], heard=False), FakeSlot(since=now[0], heard=False)
    assert [table.admit(talked), table.admit(silent), table.admit(silent_in_health)] == [Pool.REGULAR, Pool.REGULAR, Pool.HEALTH]
    assert table.admit(FakeSlot(since=now[0], heard=False)) is None  # a silent newcomer waits its turn
    assert table.admit(FakeSlot(since=now[0]), talking=True) is Pool.REGULAR  # regular slots first
    assert silent.evicted and not talked.evicted and not silent_in_health.evicted
    assert table.admit(FakeSlot(since=now[0]), talking=True) is Pool.HEALTH and silent_in_health.evicted
    assert table.admit(FakeSlot(since=now[0]), talking=True) is None  # nobody silent is left: refused
    assert table.rejected == {"full": 2, "health_only": 0, "evicted": 2, "rate_limited": 0}


def test_an_address_at_its_cap_replaces_its_own_silent_connection_or_is_refused():
    now = [10.0]
    table = ConnectionTable(max_connections=10, health_connections=1, per_address=2, clock=lambda: now[0])
    idle, busy = FakeSlot(since=9.0), FakeSlot(since=None)
    assert table.admit(idle) is Pool.REGULAR and table.admit(busy) is Pool.REGULAR
    assert table.at_cap("192.0.2.1") and not table.at_cap("192.0.2.9")
    assert table.admit(FakeSlot(since=now[0], heard=False)) is None and not idle.evicted  # silent: never for one that spoke
    probe = FakeSlot(since=now[0])
    assert table.admit(probe, talking=True) is Pool.REGULAR and idle.evicted  # its own idle one made room
    assert table.admit(FakeSlot(since=now[0]), talking=True) is None  # the probe is fresh, the other busy
    assert table.admit(FakeSlot(since=now[0], address="192.0.2.9")) is Pool.REGULAR  # others unaffected
    assert table.rejected["full"] == 2 and table.rejected["evicted"] == 1


def test_evictions_take_the_never_spoken_then_the_unserved_then_the_served():
    """Issue 45: a flood of silent connections from a scraper's address pushes out its own
    silent connections, never the scraper's idle keep-alive one (no basic auth, so it counts as
    waiting); a newcomer that spoke takes a connection that never spoke, then one that spoke
    without completing a request, and only then one that was served."""
    now = [100.0]
    table = ConnectionTable(max_connections=10, health_connections=1, per_address=4, clock=lambda: now[0])
    scraper = FakeSlot(since=10.0, answered=True)  # idle for 90 s: waiting longest of all
    half_sent = FakeSlot(since=50.0)  # spoke, never completed a request
    flood = [FakeSlot(since=99.0 + i / 10, heard=False) for i in range(2)]
    for slot in (scraper, half_sent, *flood):
        assert table.admit(slot) is Pool.REGULAR
    for _ in range(2):  # silent newcomers replace the flood's oldest silent connection
        newcomer = FakeSlot(since=now[0], heard=False)
        assert table.admit(newcomer) is Pool.REGULAR
        flood = [*flood[1:], newcomer]
        now[0] += limits.HEALTH_EVICT_AFTER
    assert not scraper.evicted and not half_sent.evicted
    for slot in flood:  # past the grace; a talking newcomer (then in its handler) takes them first
        assert table.admit(FakeSlot(since=None), talking=True) is Pool.REGULAR and slot.evicted
    assert table.admit(FakeSlot(since=now[0], heard=False)) is None  # nobody silent left: a silent newcomer waits
    assert table.admit(FakeSlot(since=None), talking=True) is Pool.REGULAR and half_sent.evicted and not scraper.evicted
    assert table.admit(FakeSlot(since=None), talking=True) is Pool.REGULAR and scraper.evicted  # only the served one is left


def test_new_connections_per_address_are_a_token_bucket():
    now = [0.0]
    rates = limits.AddressRates(rate=10, burst=5, clock=lambda: now[0])
    assert [rates.allow("a") for _ in range(6)] == [True] * 5 + [False]
    assert rates.allow("b")  # another address has its own
    now[0] += 0.1  # one token back
    assert rates.allow("a") and not rates.allow("a")


def test_the_rate_table_stays_bounded_under_a_flood_of_addresses():
    now = [0.0]
    rates = limits.AddressRates(rate=1, burst=2, clock=lambda: now[0])
    for i in range(3 * limits.MAX_TRACKED_ADDRESSES):
        rates.allow(f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}")
    assert len(rates._buckets) <= limits.MAX_TRACKED_ADDRESSES


@pytest.mark.parametrize("flag", ["max_connections", "health_connections"])
def test_the_caps_are_positive(flag):
    with pytest.raises(ConfigError):
        build_settings(flags={f"web.{flag}": "0"})
    assert getattr(build_settings(flags={f"web.{flag}": "3"}).web, flag) == 3
