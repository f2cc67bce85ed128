"""Fair authentication: the failed-login budget is spent per address and user in the auth path,
a credential verified from an address is admitted before the budget is asked, and bcrypt
checks are shared between addresses, the least recently served first.

The scenarios of the issue run against a real aiohttp server on 127.0.0.1 with real bcrypt
hashes; guessers use their own loopback addresses (127.0.0.2-5) as clients on other hosts would.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from exporter.jobs.store import IngestStore
from exporter.web.auth import AddressThrottle
from exporter.web.bcrypt_pool import BcryptPool, Check
from exporter.web.security import WebSecurity
from tests.support.apps import ingest_app
from tests.support.webconfig import HASH, PASSWORD, basic, write_web_config

GOOD = ("prometheus", PASSWORD)
HOLD_SECONDS = 10  # a held check gives up after this long, so a failing test cannot hang
GUESSERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


def fake_hash(cost: int) -> bytes:
    return bcrypt.gensalt(cost) + b"x" * 31


class Gates:
    """A check per call that records the order checks start in and waits for its own gate."""

    def __init__(self) -> None:
        self.started: list[bytes] = []
        self._gates: dict[bytes, threading.Event] = {}
        self._lock = threading.Lock()
        self._opened = False

    def gate(self, name: bytes) -> threading.Event:
        with self._lock:
            gate = self._gates.setdefault(name, threading.Event())
            if self._opened:
                gate.set()
            return gate

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.started.append(password)
        return self.gate(password).wait(HOLD_SECONDS)

    def open_all(self) -> None:
        with self._lock:
            self._opened = True
            for gate in self._gates.values():
                gate.set()

    async def until_started(self, count: int) -> None:
        for _ in range(int(HOLD_SECONDS / 0.01)):
            if len(self.started) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} checks did not start: {self.started}")


@pytest.fixture
def gates() -> AsyncIterator[Gates]:
    made = Gates()
    yield made
    made.open_all()


# --- the pool: shares and turns -------------------------------------------------------------------


async def test_the_address_served_least_recently_goes_next(gates):
    pool = BcryptPool(workers=1, per_address=4)
    try:
        cheap = fake_hash(4)
        guesses = [pool.submit(gates, f"guess{i}".encode(), cheap, "192.0.2.66") for i in range(4)]
        await gates.until_started(1)  # guess0 runs, three wait
        scrape = pool.submit(gates, b"scraper", cheap, "192.0.2.1")
        assert None not in guesses and scrape is not None
        gates.gate(b"guess0").set()
        await gates.until_started(2)
        assert gates.started == [b"guess0", b"scraper"]  # ahead of the three queued before it
        gates.open_all()
        assert await scrape is True and all([await g for g in guesses if g is not None])
        assert gates.started[2:] == [b"guess1", b"guess2", b"guess3"] and pool.pending == 0 and pool.checks == 5
    finally:
        gates.open_all()
        pool.close()


async def test_an_address_holds_at_most_its_share_of_the_pool(gates):
    pool = BcryptPool(workers=1, per_address=2)
    try:
        cheap = fake_hash(4)
        mine = [pool.submit(gates, b"a", cheap, "192.0.2.66") for _ in range(3)]
        assert mine[0] is not None and mine[1] is not None and mine[2] is None  # refused at once
        other = pool.submit(gates, b"b", cheap, "192.0.2.1")
        assert other is not None and pool.pending == 3
    finally:
        gates.open_all()
        pool.close()


async def test_a_full_queue_drops_the_newest_check_of_the_address_with_most_waiting(gates):
    pool = BcryptPool(workers=1, max_pending=3, per_address=10)
    try:
        cheap = fake_hash(4)
        flood = [pool.submit(gates, f"g{i}".encode(), cheap, "192.0.2.66") for i in range(4)]
        assert all(f is not None for f in flood)
        await gates.until_started(1)
        scrape = pool.submit(gates, b"scraper", cheap, "192.0.2.1")  # full: takes g3's place
        assert scrape is not None
        assert flood[3] is not None and await asyncio.wait_for(flood[3], HOLD_SECONDS) is None
        assert pool.submit(gates, b"g4", cheap, "192.0.2.66") is None  # its own address has more waiting
        gates.open_all()
        assert await scrape is True and [await f for f in flood[:3] if f is not None] == [True] * 3
        assert pool.pending == 0
    finally:
        gates.open_all()
        pool.close()


async def test_a_caller_that_leaves_frees_its_place_at_once(gates):
    pool = BcryptPool(workers=1, per_address=2)
    try:
        cheap = fake_hash(4)
        running = pool.submit(gates, b"a", cheap, "192.0.2.66")
        waiting = pool.submit(gates, b"b", cheap, "192.0.2.66")
        assert running is not None and waiting is not None
        await gates.until_started(1)
        waiting.cancel()
        await asyncio.sleep(0)  # the cancellation's callback
        assert pool.pending == 1
        assert pool.submit(gates, b"c", cheap, "192.0.2.66") is not None
        gates.open_all()
        assert await running is True
    finally:
        gates.open_all()
        pool.close()


# --- the scenarios, against a real server -------------------------------------------------


@pytest.fixture
async def serve(tmp_path) -> AsyncIterator[Callable[..., object]]:
    started: list[tuple[web.AppRunner, WebSecurity]] = []

    async def start(users: dict[str, str], **kwargs: object) -> tuple[str, WebSecurity]:
        config = write_web_config(tmp_path / "web.yml", {"basic_auth_users": users})
        sec = WebSecurity.from_file(config, exempt_paths=frozenset({"/healthz", "/readyz"}), **kwargs)
        runner = web.AppRunner(ingest_app(IngestStore(), None, sec))
        await runner.setup()
        started.append((runner, sec))
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}", sec

    yield start
    for runner, sec in started:
        await runner.cleanup()
        sec.close()


async def get(url: str, auth: tuple[str, str] | None, source: str = "127.0.0.1", timeout: float = 10.0) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.get(url, headers=basic(auth)) as resp,
    ):
        await resp.read()
        return resp.status


async def test_a_wrong_client_at_the_scraper_s_address_does_not_lock_the_scraper_out(serve):
    """One misconfigured client keeps sending a wrong password for the scraper's user from the
    scraper's address, until the budget is spent: the verified scraper is still served, through
    and after its cache window; health probes from that address always are."""
    url, sec = await serve({"prometheus": HASH}, cache_seconds=0.2, throttle=AddressThrottle(burst=3, per_second=0.01))
    assert await get(url + "/metrics", GOOD) == 200
    statuses = [await get(url + "/metrics", ("prometheus", "old-password")) for _ in range(5)]
    assert statuses == [401, 401, 401, 429, 429]
    for _ in range(3):
        assert await get(url + "/metrics", GOOD) == 200  # cached, then re-checked outside the budget
        assert await get(url + "/healthz", None) == 200
        assert await get(url + "/readyz", None) == await get(url + "/readyz", None, source="127.0.0.9")  # as anywhere else
        assert await get(url + "/metrics", ("prometheus", "old-password")) == 429
        await asyncio.sleep(0.25)  # past the cache window
    assert sec.auth_failures == {"wrong_password": 3, "throttled": 5}
    # A client that never verified from this address is held back with the guesser.
    assert await get(url + "/metrics", ("prometheus", "s3cret-pass ")) == 429


async def test_a_verified_credential_admits_nobody_from_another_address(serve):
    url, _ = await serve({"prometheus": HASH}, throttle=AddressThrottle(burst=1, per_second=0.01))
    assert await get(url + "/metrics", GOOD) == 200
    assert await get(url + "/metrics", ("prometheus", "guess"), source="127.0.0.2") == 401
    assert await get(url + "/metrics", GOOD, source="127.0.0.2") == 429  # the cache is 127.0.0.1's
    assert await get(url + "/metrics", GOOD) == 200


class Recorded(BcryptPool):
    """The pool, with the order checks were submitted and started in (by password)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, bytes]] = []  # appended from the loop and the threads: list.append is atomic

    def submit(self, check: Check, password: bytes, hashed: bytes, address: str = "") -> asyncio.Future[bool | None] | None:
        def recorded(password: bytes, hashed: bytes) -> bool:
            self.events.append(("start", password))
            return check(password, hashed)

        # Recorded before the pool sees it: a free worker may start the check at once, and a
        # "start" logged ahead of its "submit" would count the next round's checks as ahead of it.
        entry = ("submit", password)
        self.events.append(entry)
        future = super().submit(recorded, password, hashed, address)
        if future is None:  # refused: it was never submitted (threads may append meanwhile)
            del self.events[next(k for k in range(len(self.events) - 1, -1, -1) if self.events[k] is entry)]
        return future


@pytest.mark.timeout(300)  # cost 14 in niced threads: minutes on a machine loaded 30 deep
async def test_guessers_at_cost_14_do_not_starve_the_scraper_once_its_cache_expires(serve):
    """Four addresses guess at 0.5/s each against a cost-14 user (never throttled), which keeps
    both bcrypt threads busy: every uncached scrape is still admitted and answered 200, and
    its check starts after at most one check of each other address (the least recently
    served goes first), never behind the guessers' whole queue. (The scraper's cache expires
    every few seconds here, not every two minutes: it still asks for bcrypt less often than
    each guesser, as a real one does.) No deadline is asserted: a loaded machine may be slow,
    the order is what the pool guarantees."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(14)).decode()
    pool = Recorded()
    url, sec = await serve({"prometheus": hashed}, cache_seconds=2.5, pool=pool)
    assert await get(url + "/metrics", GOOD, timeout=60) == 200
    stop = asyncio.Event()

    async def guess(source: str) -> None:
        pending = []
        for i in range(40):  # bounded: 80 s of guesses at most
            if stop.is_set():
                break
            pending.append(asyncio.create_task(get(url + "/metrics", ("prometheus", f"guess-{source}-{i}"), source=source, timeout=300)))
            await asyncio.sleep(2.0)
        for task in pending:  # guesses still queued hang up (their places are freed), as a scrape timeout would
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    guessers = [asyncio.create_task(guess(source)) for source in GUESSERS]
    try:
        scrapes = []
        for _ in range(3):
            await asyncio.sleep(3.0)  # the cache (2.5 s) has expired
            scrapes.append(await get(url + "/metrics", GOOD, timeout=60))
    finally:
        stop.set()
        await asyncio.gather(*guessers)
    assert scrapes == [200] * 3
    events = pool.events
    scraper = [i for i, e in enumerate(events) if e == ("submit", PASSWORD.encode())]
    assert len(scraper) == 4 and sum(e[0] == "submit" for e in events) > 4 + 4  # guesses were checked too
    for submitted in scraper:
        started = events.index(("start", PASSWORD.encode()), submitted)
        ahead = [e for e in events[submitted:started] if e[0] == "start"]
        assert len(ahead) <= len(GUESSERS), (ahead, events)
    assert "throttled" not in sec.auth_failures
