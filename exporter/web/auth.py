"""Basic auth against the web config's bcrypt hashes: the header, the checks in threads of their
own, the cache of verified credentials, the dummies unknown users are checked against and the
per-address budget of failed attempts."""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
import ipaddress
import math
import os
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import bcrypt

from exporter.core.clock import Clock, monotonic

AUTH_CACHE_SECONDS = 120.0   # a verified credential skips bcrypt this long: scrapes stay cheap
AUTH_CACHE_SIZE = 256
_BCRYPT_MAX_BYTES = 72       # bcrypt reads no further; Go truncates silently, and so do we
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

# At most this many bcrypt checks run at once, whatever arrives: the rest of the node keeps
# its cores (exporter-toolkit runs one at a time; two halve the wait behind a queue).
BCRYPT_WORKERS = 2
# ... and at a lower CPU priority (nice +10, Linux: per thread): a check is the one piece of work
# an outsider can order at will, so it gets the cycles nobody else wants, never those of the
# event loop, the encoder or the node's training job. Idle cores still run it at full speed.
BCRYPT_NICE = 10
# Checks waiting or running, at most: beyond either bound a request is refused at once (503)
# instead of queueing, so a flood cannot build a backlog that a scrape would wait behind.
# Work is counted in bcrypt rounds (2**cost): 16 checks of cost 10 per worker, a second or
# two of waiting at most; a costlier check is always admitted when nothing is waiting.
BCRYPT_MAX_PENDING = 64
BCRYPT_MAX_WORK = BCRYPT_WORKERS * 16 * 2**10
OVERLOADED_RETRY_SECONDS = 1

# Failed attempts per client address: a burst of 10, then one every 2 s (30 a minute).
THROTTLE_BURST = 10.0
THROTTLE_PER_SECOND = 0.5
THROTTLE_ADDRESSES = 4096    # addresses remembered; the least recently failing is forgotten first

# request[...] key: the basic-auth user the middleware admitted (handlers with their own
# bearer token accept such a request without one).
AUTHENTICATED_USER: Any
try:
    from aiohttp.web import RequestKey

    AUTHENTICATED_USER = RequestKey("authenticated_user", str)
except ImportError:  # aiohttp < 3.12 has plain string keys only
    AUTHENTICATED_USER = "cann_exporter.authenticated_user"


def parse_basic(header: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) bytes from an `Authorization: Basic ...` header, or None."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:_BCRYPT_MAX_BYTES], hashed)
    except ValueError:
        return False


def bcrypt_cost(hashed: bytes) -> int:
    """The cost of a hash the config parser accepted (`$2b$10$...` -> 10)."""
    return int(hashed[4:6])


# --- unknown users ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dummies:
    """The hashes unknown users are checked against, so that neither the answer nor its time
    tells whether a user exists.

    With one cost for every user, a dummy of that cost is all it takes. With mixed costs, one
    dummy cost for all (say the highest) would single out every cheaper user as existing, and
    a cost drawn per request would single out unknown names by their varying time. So each
    unknown name gets, for good, the cost of one configured user picked by a keyed hash of the
    name: unknown names spread over the costs as the users do, and no name's time varies. The
    key comes from the configured hashes (random salts, secret): nobody can predict a name's
    cost, and it survives restarts and reloads that keep the users. When the users change, the
    unknown names' costs are drawn anew; one cost for every user leaves nothing to compare.
    """

    costs: tuple[int, ...]           # every user's cost, in the users' name order
    hashes: Mapping[int, bytes]      # one dummy per configured cost
    key: bytes

    @classmethod
    def for_users(cls, users: Mapping[str, bytes]) -> Dummies | None:
        if not users:
            return None
        costs = tuple(bcrypt_cost(users[name]) for name in sorted(users))
        key = hashlib.sha256(b"\n".join(sorted(users.values()))).digest()
        return cls(costs, {cost: _dummy_hash(cost) for cost in set(costs)}, key)

    def cost_for(self, user: bytes) -> int:
        digest = hmac.new(self.key, user, hashlib.sha256).digest()
        return self.costs[int.from_bytes(digest[:8], "big") % len(self.costs)]

    def hash_for(self, user: bytes) -> bytes:
        return self.hashes[self.cost_for(user)]


def _dummy_hash(cost: int) -> bytes:
    """A well-formed hash of ``cost`` that no password matches, made without hashing: a check
    against it costs the full ``cost``, making it costs nothing (no bcrypt at load)."""
    digest = "".join(secrets.choice(_BCRYPT_ALPHABET) for _ in range(31))
    return bcrypt.gensalt(cost) + digest.encode("ascii")


# --- verified credentials -----------------------------------------------------------------------

class SuccessCache:
    """Verified credentials, keyed by an HMAC of user, hash and password so no password is kept
    and a changed hash can never hit; only successes are cached, so every failed guess still
    costs a full bcrypt."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._secret = secrets.token_bytes(32)
        self._entries: dict[bytes, tuple[float, str, bytes]] = {}   # key -> (expires, user, hash)
        self._lock = threading.Lock()    # reloads prune from a thread

    def key(self, user: bytes, hashed: bytes, password: bytes) -> bytes:
        return hmac.new(self._secret, repr((user, hashed, password)).encode(), hashlib.sha256).digest()

    def hit(self, key: bytes) -> bool:
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and entry[0] > self.clock()

    def add(self, key: bytes, user: str, hashed: bytes) -> None:
        with self._lock:
            now = self.clock()
            if len(self._entries) >= self.size:
                self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
                while len(self._entries) >= self.size:
                    del self._entries[next(iter(self._entries))]
            self._entries[key] = (now + self.ttl, user, hashed)

    def retain(self, users: Mapping[str, bytes]) -> None:
        """Forget the entries of users removed or rehashed; the others stay verified."""
        with self._lock:
            self._entries = {k: e for k, e in self._entries.items() if users.get(e[1]) == e[2]}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# --- the checks ---------------------------------------------------------------------------------

class BcryptPool:
    """bcrypt off the event loop (it releases the GIL), ``workers`` at a time, and a bound on
    the checks waiting: :meth:`submit` says None rather than queue beyond it."""

    def __init__(self, workers: int = BCRYPT_WORKERS, max_pending: int = BCRYPT_MAX_PENDING,
                 max_work: int = BCRYPT_MAX_WORK) -> None:
        self.max_pending, self.max_work = max_pending, max_work
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="bcrypt", initializer=_lower_priority)
        self._lock = threading.Lock()
        self._work = 0
        self.pending = 0     # queued or running
        self.checks = 0      # started so far

    def submit(self, check: Callable[[bytes, bytes], bool], password: bytes, hashed: bytes) -> asyncio.Future[bool] | None:
        work = 2 ** bcrypt_cost(hashed)
        with self._lock:
            if self.pending and (self.pending >= self.max_pending or self._work + work > self.max_work):
                return None
            self.pending += 1
            self._work += work
        future: Future[bool] = self._executor.submit(self._run, check, password, hashed)
        # Released when the check ends or is cancelled while queued, not when its caller
        # goes away: a check still running still holds a worker.
        future.add_done_callback(lambda _: self._release(work))
        return asyncio.wrap_future(future)

    def _run(self, check: Callable[[bytes, bytes], bool], password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.checks += 1
        return check(password, hashed)

    def _release(self, work: int) -> None:
        with self._lock:
            self.pending -= 1
            self._work -= work

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# --- failed attempts per address ----------------------------------------------------------------

def _lower_priority() -> None:
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BCRYPT_NICE))
    except (OSError, AttributeError):  # not Linux, or not allowed: run at the loop's priority
        pass


@functools.lru_cache(maxsize=THROTTLE_ADDRESSES)   # a flood asks for the same few addresses
def client_address(remote: str | None) -> str:
    """Whose budget a request spends: its IPv4 address, or its IPv6 /64 (what one host
    usually holds; single IPv6 addresses are free to come by). The peer of the connection,
    never a forwarded-for header a client could write."""
    try:
        ip = ipaddress.ip_address((remote or "").split("%")[0])
    except ValueError:
        return remote or ""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class AddressThrottle:
    """A token bucket per client address: each check that runs bcrypt takes a token, a
    success gives it back, so only failures drain it. Addresses with a full bucket are not
    kept; past ``size`` addresses the least recently failing is forgotten (its budget starts
    afresh: an attacker with that many addresses is held by the pool's bound instead)."""

    def __init__(self, burst: float = THROTTLE_BURST, per_second: float = THROTTLE_PER_SECOND,
                 size: int = THROTTLE_ADDRESSES, clock: Clock = monotonic) -> None:
        self.burst, self.rate, self.size, self.clock = burst, per_second, size, clock
        self._buckets: dict[str, tuple[float, float]] = {}   # address -> (tokens, when)

    def _tokens(self, address: str, now: float) -> float:
        tokens, when = self._buckets.get(address, (self.burst, now))
        return min(self.burst, tokens + (now - when) * self.rate)

    def retry_after(self, address: str) -> int | None:
        """None within the budget, else the seconds until the next attempt is allowed."""
        tokens = self._tokens(address, self.clock())
        if tokens >= 1:
            return None
        return max(1, math.ceil((1 - tokens) / self.rate))

    def spend(self, address: str) -> None:
        now = self.clock()
        tokens = self._tokens(address, now) - 1
        self._buckets.pop(address, None)           # re-inserted last: most recently failing
        if len(self._buckets) >= self.size:
            del self._buckets[next(iter(self._buckets))]
        self._buckets[address] = (tokens, now)

    def refund(self, address: str) -> None:
        now = self.clock()
        tokens = self._tokens(address, now) + 1
        if tokens >= self.burst:
            self._buckets.pop(address, None)
        else:
            self._buckets[address] = (tokens, now)

    def __len__(self) -> int:
        return len(self._buckets)
