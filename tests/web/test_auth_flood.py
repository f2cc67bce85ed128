"""Basic auth under a flood of wrong passwords and across reloads: verified clients never wait
behind bcrypt, reloads keep them verified, failures are throttled per address, the queue of
checks is bounded, unknown users cost what known ones do, and absurd bcrypt costs are refused.

bcrypt is counted (or held) by replacing `checkpw` in exporter.web.security; the assertions
are on what was checked and answered, never on how long it took.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
from aiohttp import web

from exporter.cli import main
from exporter.jobs.store import IngestStore
from exporter.web import auth, bcrypt_pool, security
from exporter.web.auth import AddressThrottle, Dummies, client_address
from exporter.web.bcrypt_pool import BcryptPool
from exporter.web.config import WebConfigError, parse_web_config
from exporter.web.security import WebSecurity, load_web_config
from tests.support.apps import PUBLISHER, ingest_app
from tests.support.webconfig import (
    HASH,
    PASSWORD,
    Running,
    basic,
    write_web_config,
)

GOOD = ("prometheus", PASSWORD)
HOLD_SECONDS = 10  # a held check gives up after this long, so a failing test cannot hang


def users(**hashes: str) -> dict:
    return {"basic_auth_users": hashes or {"prometheus": HASH}}


def fake_hash(cost: int) -> str:
    """A well-formed hash of ``cost`` that takes no hashing to make (for what is never checked)."""
    return (bcrypt.gensalt(cost) + b"x" * 31).decode()


class Bcrypt:
    """Stands in for exporter.web.security.checkpw: records (password, hash) and runs the real
    check, unless held, in which case the checks wait until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes, bytes]] = []
        self.started = threading.Semaphore(0)
        self._open = threading.Event()
        self._open.set()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.calls.append((password, hashed))
        self.started.release()
        self._open.wait(HOLD_SECONDS)
        return auth.checkpw(password, hashed)

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def passwords(self) -> list[bytes]:
        return [password for password, _ in self.calls]

    async def wait_started(self, count: int = 1) -> None:
        for _ in range(count):
            assert await asyncio.to_thread(self.started.acquire, timeout=HOLD_SECONDS), "no check started"


@pytest.fixture
def checks(monkeypatch) -> Iterator[Bcrypt]:
    fake = Bcrypt()
    monkeypatch.setattr(security, "checkpw", fake)
    yield fake
    fake.release()


@pytest.fixture
async def serve_with() -> AsyncIterator[Callable[..., object]]:
    """Like the `serve` fixture, with the WebSecurity's bounds chosen by the test."""
    started: list[tuple[web.AppRunner, WebSecurity]] = []

    async def start(config: Path, **kwargs: object) -> Running:
        sec = WebSecurity.from_file(config, poll_interval=0.05, **kwargs)
        ingest = IngestStore()
        app = ingest_app(ingest, None, sec)
        runner = web.AppRunner(app)
        await runner.setup()
        started.append((runner, sec))
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=sec.ssl_context).start()
        scheme = "https" if sec.ssl_context else "http"
        return Running(f"{scheme}://127.0.0.1:{runner.addresses[0][1]}", sec, ingest, app[PUBLISHER])

    yield start
    for runner, sec in started:
        await runner.cleanup()
        sec.close()


@pytest.fixture
def make_security(tmp_path) -> Iterator[Callable[..., WebSecurity]]:
    made: list[WebSecurity] = []

    def make(doc: dict | None = None, **kwargs: object) -> WebSecurity:
        sec = WebSecurity.from_file(write_web_config(tmp_path / "web.yml", doc or users()), **kwargs)
        made.append(sec)
        return sec

    yield make
    for sec in made:
        sec.close()


def header(user: str, password: str) -> str:
    return basic((user, password))["Authorization"]


def rewrite(path: Path, doc: dict | None = None, content: bytes | None = None) -> None:
    """Rewrite the file so that its stat changes even on coarse-grained filesystems."""
    if doc is not None:
        write_web_config(path, doc)
    else:
        path.write_bytes(content or b"")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.02)


# --- a verified client never waits behind others' bcrypt ------------------------------------------


async def test_a_verified_client_is_answered_while_a_flood_holds_every_bcrypt_worker(serve_with, tmp_path, checks):
    running = await serve_with(
        write_web_config(tmp_path / "web.yml", users()), pool=BcryptPool(workers=2, per_address=100), throttle=AddressThrottle(burst=1000)
    )
    assert (await running.get("/metrics", None, GOOD))[0] == 200
    assert checks.passwords() == [PASSWORD.encode()]

    checks.hold()
    flood = [asyncio.create_task(running.get("/metrics", None, ("prometheus", f"guess-{i}"))) for i in range(20)]
    await checks.wait_started(3)  # both workers busy with guesses (and the first check)
    await wait_until(lambda: running.security.part().bcrypt_pending == 20)
    assert (await asyncio.wait_for(running.get("/metrics", None, GOOD), HOLD_SECONDS / 2))[0] == 200
    assert checks.passwords().count(PASSWORD.encode()) == 1  # answered from the cache
    assert running.security.part().bcrypt_pending == 20  # while all 20 guesses still wait

    checks.release()
    assert [r[0] for r in await asyncio.gather(*flood)] == [401] * 20
    assert len(checks.calls) == 21
    assert running.security.auth_failures == {"wrong_password": 20}
    assert running.security.part().bcrypt_checks == 21


# --- reloads --------------------------------------------------------------------------------------


async def test_a_reload_with_the_same_users_keeps_clients_verified(make_security, tmp_path, checks):
    sec = make_security()
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).user == "prometheus"
    # Another header, another user: the file changed, prometheus' hash did not.
    rewrite(sec.path, {**users(prometheus=HASH, hooks=HASH), "http_server_config": {"headers": {"X-Frame-Options": "deny"}}})
    assert sec.reload_if_changed() is True
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).user == "prometheus"
    assert len(checks.calls) == 1  # no bcrypt after the reload


async def test_a_certificate_rotation_keeps_clients_verified(pki, serve_with, tmp_path, checks):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pki.server.cert.read_bytes())
    key.write_bytes(pki.server.key.read_bytes())
    config = write_web_config(tmp_path / "web.yml", {"tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key"}, **users()})
    running = await serve_with(config)
    assert (await running.get("/metrics", pki.client_context(), GOOD))[0] == 200
    rewrite(cert, content=pki.server.cert.read_bytes())  # rewritten (a renewal, as the reload sees it)
    await wait_until(lambda: running.security.reloads["success"] == 1)
    assert (await running.get("/metrics", pki.client_context(), GOOD))[0] == 200
    assert len(checks.calls) == 1


async def test_a_changed_hash_or_a_removed_user_no_longer_passes(make_security, checks):
    sec = make_security()
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).user == "prometheus"
    rotated = bcrypt.hashpw(b"rotated", bcrypt.gensalt(4))
    rewrite(sec.path, users(prometheus=rotated.decode()))
    assert sec.reload_if_changed() is True
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).reason == "wrong_password"
    assert checks.calls[-1] == (PASSWORD.encode(), rotated)  # checked against the new hash
    assert (await sec.authenticate(header("prometheus", "rotated"), "192.0.2.1")).user == "prometheus"

    rewrite(sec.path, users(hooks=HASH))
    assert sec.reload_if_changed() is True
    before = len(checks.calls)
    assert (await sec.authenticate(header("prometheus", "rotated"), "192.0.2.1")).reason == "unknown_user"
    assert len(checks.calls) == before + 1 and checks.calls[-1][1] != rotated


async def test_a_reload_during_the_check_wins(make_security, checks):
    """A check against the old hash that ends after the reload admits nobody."""
    sec = make_security()
    checks.hold()
    pending = asyncio.create_task(sec.authenticate(header(*GOOD), "192.0.2.1"))
    await checks.wait_started()
    rewrite(sec.path, users(prometheus=bcrypt.hashpw(b"rotated", bcrypt.gensalt(4)).decode()))
    assert sec.reload_if_changed() is True
    checks.release()
    assert (await pending).reason == "wrong_password"
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).reason == "wrong_password"


# --- failures throttled per address ---------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_failures_are_throttled_per_address_and_user_without_bcrypt(make_security, checks):
    clock = Clock()
    sec = make_security(throttle=AddressThrottle(burst=3, per_second=0.1, clock=clock, address_factor=2))
    assert (await sec.authenticate(header(*GOOD), "192.0.2.9")).user == "prometheus"  # verified elsewhere
    reasons = [(await sec.authenticate(header("prometheus", "guess"), "192.0.2.1")).reason for _ in range(3)]
    assert reasons == ["wrong_password"] * 3 and len(checks.calls) == 4

    # The credential verified at 192.0.2.9 admits nobody at 192.0.2.1: refused before bcrypt.
    throttled = [await sec.authenticate(header(user, password), "192.0.2.1") for user, password in (("prometheus", "guess"), GOOD)]
    assert {(v.reason, v.retry_after) for v in throttled} == {("throttled", 10)}
    assert len(checks.calls) == 4
    assert (await sec.authenticate(header(*GOOD), "192.0.2.9")).user == "prometheus"  # others are not held back
    assert (await sec.authenticate(header("prometheus", "guess"), "192.0.2.2")).reason == "wrong_password"

    # Other names from the same address have a budget of their own, within the address's (6).
    others = [(await sec.authenticate(header(f"user{i}", "guess"), "192.0.2.1")).reason for i in range(4)]
    assert others == ["unknown_user"] * 3 + ["throttled"]
    clock.now += 10  # one token back (per user; two per address)
    assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).user == "prometheus"
    assert sec.auth_failures == {"wrong_password": 4, "unknown_user": 3, "throttled": 3}


async def test_successes_do_not_drain_the_budget(make_security, checks):
    sec = make_security(throttle=AddressThrottle(burst=2, per_second=0.001), cache_seconds=0)
    for _ in range(5):  # uncached: bcrypt each time
        assert (await sec.authenticate(header(*GOOD), "192.0.2.1")).user == "prometheus"
    assert len(checks.calls) == 5


async def test_a_throttled_address_and_user_gets_429_with_retry_after(serve_with, tmp_path, checks):
    running = await serve_with(write_web_config(tmp_path / "web.yml", users()), throttle=AddressThrottle(burst=2, per_second=0.01))
    statuses = [(await running.get("/metrics", None, ("prometheus", "guess")))[0] for _ in range(2)]
    status, body, headers = await running.get("/metrics", None, ("prometheus", "guess"))
    assert statuses == [401, 401] and status == 429 and int(headers["Retry-After"]) == 100
    assert headers.get("Connection", "").lower() == "close"  # the client must connect again
    assert body == "too many failed logins from this address; retry later\n" and len(checks.calls) == 2


def test_addresses_share_a_budget_per_ipv4_address_and_ipv6_64():
    assert client_address("192.0.2.1") == "192.0.2.1"
    assert client_address("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_address("2001:db8:1:2::1") == client_address("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_address("2001:db8:1:3::1") != client_address("2001:db8:1:2::1")
    assert client_address(None) == client_address("") == ""


def test_the_address_table_is_bounded():
    clock = Clock()
    throttle = AddressThrottle(burst=1, per_second=0.001, size=4, clock=clock)
    for address in ("a", "b", "c"):
        throttle.spend(address, b"u")  # two budgets each: (address, user), address
    assert len(throttle) == 4
    assert throttle.retry_after("a", b"u") is None  # forgotten first: the least recently failing
    assert throttle.retry_after("b", b"u") and throttle.retry_after("c", b"u")
    throttle.refund("c", b"u")  # back to full: not kept
    assert len(throttle) == 2


# --- the bound on waiting checks ------------------------------------------------------------------


async def test_past_the_bound_a_check_is_refused_at_once(serve_with, tmp_path, checks):
    running = await serve_with(
        write_web_config(tmp_path / "web.yml", users()),
        pool=BcryptPool(workers=1, max_pending=3, per_address=100),
        throttle=AddressThrottle(burst=100),
    )
    assert (await running.get("/metrics", None, GOOD))[0] == 200
    checks.hold()
    held = [asyncio.create_task(running.get("/metrics", None, ("prometheus", f"guess-{i}"))) for i in range(4)]
    await checks.wait_started(2)
    await wait_until(lambda: running.security.part().bcrypt_pending == 4)  # one running, three waiting
    status, body, headers = await asyncio.wait_for(running.get("/metrics", None, ("mallory", "guess")), HOLD_SECONDS / 2)
    assert (status, headers["Retry-After"]) == (503, "1") and "too many credential checks" in body
    assert (await asyncio.wait_for(running.get("/metrics", None, GOOD), HOLD_SECONDS / 2))[0] == 200
    assert len(checks.calls) == 2  # the first check and one held guess
    checks.release()
    assert [r[0] for r in await asyncio.gather(*held)] == [401] * 4
    assert running.security.auth_failures == {"overloaded": 1, "wrong_password": 4}
    assert running.security.part().bcrypt_pending == 0


async def test_the_bound_counts_bcrypt_work_not_just_checks():
    gate = threading.Event()
    pool = BcryptPool(workers=1, max_pending=10, max_work=2**4)  # one cost-4 check may wait (the running one is not counted)
    try:
        cheap, dear = fake_hash(4).encode(), fake_hash(12).encode()
        first, second = pool.submit(lambda p, h: gate.wait(HOLD_SECONDS), b"", cheap), pool.submit(lambda p, h: True, b"", cheap)
        assert first is not None and second is not None
        assert pool.submit(lambda p, h: True, b"", cheap) is None  # a second waiting would exceed the work
        assert pool.submit(lambda p, h: True, b"", dear) is None
        gate.set()
        assert await first and await second
        await wait_until(lambda: pool.pending == 0)
        alone = pool.submit(lambda p, h: True, b"", dear)  # dearer than the bound: admitted alone
        assert alone is not None and await alone
    finally:
        gate.set()
        pool.close()


async def test_bcrypt_runs_below_the_event_loop_s_priority():
    pool = BcryptPool(workers=1)
    try:
        check = pool.submit(lambda p, h: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), b"", fake_hash(4).encode())
        assert check is not None
        loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        assert await check == min(19, loop_nice + bcrypt_pool.BCRYPT_NICE)
    finally:
        pool.close()


# --- unknown users ----------------------------------------------------------------------------------


async def test_an_unknown_user_is_checked_at_the_cost_of_a_known_one(make_security, checks, monkeypatch):
    cheap, dear = fake_hash(4), fake_hash(12)
    sec = make_security(users(alice=cheap, bob=cheap, carol=dear), throttle=AddressThrottle(burst=10_000))
    monkeypatch.setattr(security, "checkpw", lambda password, hashed: checks.calls.append((password, hashed)) or False)

    async def cost_checked(user: str) -> int:
        assert (await sec.authenticate(header(user, "guess"), "192.0.2.1")).user is None
        return auth.bcrypt_cost(checks.calls[-1][1])

    assert [await cost_checked(u) for u in ("alice", "bob", "carol")] == [4, 4, 12]  # the user's own hash
    names = [f"user{i}" for i in range(300)]
    costs = {name: await cost_checked(name) for name in names}
    assert set(costs.values()) == {4, 12}  # only configured costs, spread as the users are
    assert 120 < sum(c == 4 for c in costs.values()) < 280  # 2 in 3 users cost 4 (expected 200)
    for _ in range(2):  # a name's cost never varies
        assert [await cost_checked(n) for n in names[:20]] == [costs[n] for n in names[:20]]
    assert sec.auth_failures == {"wrong_password": 3, "unknown_user": 340}

    # The same users again (a restart, or a reload): every unknown name keeps its cost.
    again = Dummies.for_users(load_web_config(sec.path).config.users)
    assert all(again.cost_for(n.encode()) == costs[n] for n in names)


def test_with_one_cost_every_unknown_user_gets_it():
    dummies = Dummies.for_users(parse_web_config(f"basic_auth_users: {{a: '{fake_hash(7)}', b: '{fake_hash(7)}'}}").users)
    assert {auth.bcrypt_cost(dummies.hash_for(f"u{i}".encode())) for i in range(100)} == {7}


def test_dummies_take_no_hashing_at_load(tmp_path, monkeypatch):
    """A cost-16 user loads at once: the dummy of its cost is made without bcrypt."""
    monkeypatch.setattr(bcrypt, "hashpw", lambda *a: pytest.fail("hashed at load"))
    state = load_web_config(write_web_config(tmp_path / "web.yml", users(alice=fake_hash(16))))
    dummy = state.dummies.hash_for(b"mallory")
    assert auth.bcrypt_cost(dummy) == 16 and len(dummy) == 60


# --- costs refused at load ------------------------------------------------------------------------


@pytest.mark.parametrize("cost", [17, 31, 99])
def test_a_cost_above_16_is_refused_naming_the_user(cost):
    with pytest.raises(WebConfigError) as err:
        parse_web_config(f"basic_auth_users: {{alice: '{HASH}', bob: '$2b${cost}${'a' * 21}.{'b' * 31}'}}")
    assert err.value.problems == [
        f"web config: basic_auth_users.bob: bcrypt cost {cost} is above 16, the most accepted "
        "(each step doubles the work: 16 takes ~4 s a check, 31 a day and a half); "
        "rehash with htpasswd -nBC 10"
    ]


@pytest.mark.parametrize(
    "hashed, message",
    [
        ("$2b$03$" + "a" * 21 + "." + "b" * 31, "bcrypt cost 3 is below 4"),
        ("$2x$10$" + "a" * 21 + "." + "b" * 31, "expected a bcrypt hash"),  # only $2a$, $2b$, $2y$
        ("$2b$10$" + "a" * 22 + "b" * 31, "the salt's last character must be one of . O e u"),
        ("$2b$10$" + "a" * 21 + "." + "b" * 30, "expected a bcrypt hash"),
    ],
)
def test_hashes_are_checked_strictly(hashed, message):
    with pytest.raises(WebConfigError, match=message):
        parse_web_config(f"basic_auth_users: {{carol: '{hashed}'}}")


def test_cost_16_and_every_prefix_are_accepted():
    doc = {f"u{p}": f"$2{p}$16${'a' * 21}.{'b' * 31}" for p in "aby"}
    assert set(parse_web_config(repr({"basic_auth_users": doc}).replace("'", '"')).users) == {"ua", "ub", "uy"}


def test_serve_and_check_config_refuse_cost_17(tmp_path, capsys):
    web_yml = write_web_config(tmp_path / "web.yml", users(alice=fake_hash(17)))
    config = tmp_path / "config.yml"
    config.write_text(f"web:\n  config_file: {web_yml}\n")
    assert main(["check-config", str(config)]) == 2
    assert "basic_auth_users.alice: bcrypt cost 17 is above 16" in capsys.readouterr().err
    assert main(["serve", "--web.config.file", str(web_yml), "--simulate", "healthy"]) == 2
    assert "basic_auth_users.alice: bcrypt cost 17 is above 16" in capsys.readouterr().err


async def test_a_reload_to_cost_17_keeps_the_last_good_config(serve_with, tmp_path, caplog):
    config = write_web_config(tmp_path / "web.yml", users())
    running = await serve_with(config)
    rewrite(config, users(prometheus=fake_hash(17)))
    await wait_until(lambda: running.security.reloads["failure"] == 1)
    errors = [getattr(r, "error", "") for r in caplog.records]
    assert any("basic_auth_users.prometheus: bcrypt cost 17 is above 16" in e for e in errors)
    status, body, _ = await running.get("/metrics", None, GOOD)
    assert status == 200
    assert "cann_exporter_web_config_last_reload_success 0.0" in body
    assert 'cann_exporter_web_config_reloads_total{result="failure"} 1.0' in body
