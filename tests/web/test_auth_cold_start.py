"""Issue 45, "A correct password never gets 429": the failed-login budget counts wrong passwords,
never checks their client gave up on.

A check, once queued, runs to its end whether or not its client still waits; its outcome is
settled then (a success cached and its token given back, a failure's token kept), and the same
credential from the same address meanwhile waits for that check rather than queueing another.
Before: a scraper starting together with 4 guessers against a cost-14 user timed out on its
first checks, each abandoned check kept its token, and the scraper got 27 x 503 and 9 x 429 with
the correct password (40 of 102 scrapes failed).

The unit tests hold checks behind gates (no timing); the scenario of the issue runs real cost-14
bcrypt against a real server, guessers on their own loopback addresses.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from exporter.jobs.store import IngestStore
from exporter.web import security
from exporter.web.auth import AddressThrottle, checkpw
from exporter.web.bcrypt_pool import BcryptPool, Check
from exporter.web.security import WebSecurity
from tests.support.apps import ingest_app
from tests.support.webconfig import HASH, PASSWORD, basic, write_web_config

GOOD = ("prometheus", PASSWORD)
HOLD_SECONDS = 10  # a held check gives up after this long, so a failing test cannot hang
GUESSERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


async def get(url: str, auth: tuple[str, str] | None, source: str = "127.0.0.1", timeout: float = 10.0) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as session,
        session.get(url, headers=basic(auth)) as resp,
    ):
        await resp.read()
        return resp.status


class Recorded(BcryptPool):
    """The pool, with the checks started, by password (appended from the threads: atomic)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[bytes] = []

    def submit(self, check: Check, password: bytes, hashed: bytes, address: str = "") -> asyncio.Future[bool | None] | None:
        def recorded(password: bytes, hashed: bytes) -> bool:
            self.started.append(password)
            return check(password, hashed)

        return super().submit(recorded, password, hashed, address)


class Held:
    """bcrypt behind a gate: checks start, then wait until the test opens it."""

    def __init__(self) -> None:
        self.started = 0
        self._open = threading.Event()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.started += 1
        self._open.wait(HOLD_SECONDS)
        return checkpw(password, hashed)

    def release(self) -> None:
        self._open.set()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    fake = Held()
    monkeypatch.setattr(security, "checkpw", fake)
    yield fake
    fake.release()


@pytest.fixture
def make_security(tmp_path) -> Iterator[Callable[..., WebSecurity]]:
    made: list[WebSecurity] = []

    def make(**kwargs: object) -> WebSecurity:
        sec = WebSecurity.from_file(write_web_config(tmp_path / "web.yml", {"basic_auth_users": {"prometheus": HASH}}), **kwargs)
        made.append(sec)
        return sec

    yield make
    for sec in made:
        sec.close()


def header(password: str) -> str:
    return basic(("prometheus", password))["Authorization"]


async def abandon(sec: WebSecurity, password: str, times: int) -> None:
    """``times`` requests with ``password`` from 127.0.0.1, each given up on (a client timeout)."""
    for _ in range(times):
        waiting = asyncio.ensure_future(sec.authenticate(header(password), "127.0.0.1"))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(int(HOLD_SECONDS / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_a_correct_check_its_client_gave_up_on_is_cached_and_costs_no_budget(make_security, held) -> None:
    """Twenty scrapes given up on while their one check runs: one check, and once it ends the
    next scrape is admitted from the cache; the budget (2 here) never moved."""
    throttle = AddressThrottle(burst=2, per_second=0.001)
    sec = make_security(throttle=throttle)
    await abandon(sec, PASSWORD, 20)
    assert held.started == 1 and throttle.retry_after("127.0.0.1", b"prometheus") is None
    held.release()
    await until(lambda: not sec._checking)
    assert (await sec.authenticate(header(PASSWORD), "127.0.0.1")).user == "prometheus"
    assert held.started == 1 and len(throttle) == 0  # every token back: nothing failed
    assert "throttled" not in sec.auth_failures and "overloaded" not in sec.auth_failures


async def test_wrong_passwords_their_client_gave_up_on_still_count(make_security, held) -> None:
    """Abandoning a guess does not make it free: each ends as a failed login, so a third guess
    with a budget of 2 is refused (429), without bcrypt."""
    throttle = AddressThrottle(burst=2, per_second=0.001)
    sec = make_security(throttle=throttle)
    await abandon(sec, "guess-1", 1)
    await abandon(sec, "guess-2", 1)
    held.release()
    await until(lambda: not sec._checking)
    verdict = await sec.authenticate(header("guess-3"), "127.0.0.1")
    assert verdict.reason == "throttled" and held.started == 2


async def test_a_check_that_never_runs_gives_its_token_back(make_security, held) -> None:
    """Refused for want of room (503), or dropped for a fairer check: no login was tried."""
    throttle = AddressThrottle(burst=3, per_second=0.001)
    sec = make_security(throttle=throttle, pool=BcryptPool(workers=1, per_address=1))
    first = asyncio.ensure_future(sec.authenticate(header("guess-1"), "127.0.0.1"))
    await until(lambda: held.started == 1)
    for i in range(5):  # the address holds its share of the pool: 503 at once
        verdict = await sec.authenticate(header(f"guess-{i + 2}"), "127.0.0.1")
        assert verdict.reason == "overloaded"
    assert throttle.retry_after("127.0.0.1", b"prometheus") is None  # only the running check holds a token
    held.release()
    assert (await first).reason == "wrong_password"


# --- the scenario --------------------------------------------------------------------------


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


@pytest.mark.timeout(300)  # cost 14 in niced threads: minutes on a machine loaded 30 deep
async def test_a_scraper_starting_with_4_guessers_against_cost_14_fails_at_most_its_first_check(serve) -> None:
    """The exporter has just started: a scraper and four guessers (each a wrong password every
    half second) begin together against a cost-14 user, which keeps both bcrypt threads busy.
    The scraper gives each scrape up after half a second, less than one cost-14 check takes
    (as a 10 s scrape timeout is less than a check's wait behind a cold start's queue), and
    scrapes again half a second later. Its first check outlasts several scrapes; every scrape that
    fails is one given up on while that check runs (bcrypt runs once for the scraper), none gets
    429, 503 or 401, and from its first 200 on every scrape is 200. Before, its abandoned checks
    held its address's share of the pool (here: a timeout, then 7 x 503) and each kept its token
    (429 once ten were spent)."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(14)).decode()
    pool = Recorded()
    url, _ = await serve({"prometheus": hashed}, pool=pool)
    stop = asyncio.Event()

    async def guess(source: str) -> None:
        pending = []
        for i in range(80):  # bounded: 40 s of guesses at most
            if stop.is_set():
                break
            pending.append(asyncio.create_task(get(url + "/metrics", ("prometheus", f"guess-{source}-{i}"), source=source, timeout=10)))
            await asyncio.sleep(0.5)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    guessers = [asyncio.create_task(guess(source)) for source in GUESSERS]
    scrapes: list[int | str] = []
    try:
        for _ in range(60):  # bounded: until 10 scrapes after the first 200
            try:
                scrapes.append(await get(url + "/metrics", GOOD, timeout=0.5))
            except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
                scrapes.append("timeout" if isinstance(exc, asyncio.TimeoutError) else repr(exc))
            if scrapes.count(200) >= 10:
                break
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        await asyncio.gather(*guessers)
    assert 200 in scrapes, scrapes
    first = scrapes.index(200)
    assert set(scrapes[:first]) <= {"timeout"} and scrapes[first:] == [200] * (len(scrapes) - first), str(scrapes)
    assert pool.started.count(PASSWORD.encode()) == 1  # the scraper's one check
    assert len(pool.started) > 4  # the guesses were checked too
