"""Basic auth against the web config's bcrypt hashes: the header, the cache of verified
credentials (bound to the client's address), the dummies unknown users are checked against and
the budget of failed attempts per address and user. The checks themselves run in
exporter.web.bcrypt_pool."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import ipaddress
import math
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import bcrypt

from exporter.core.clock import Clock, monotonic

AUTH_CACHE_SECONDS = 120.0  # a verified credential skips bcrypt this long: scrapes stay cheap
# ... and, this long after its last check, skips the failed-login budget: re-checked in its
# turn, never refused because someone else failed from its address with its user name.
AUTH_REMEMBER_SECONDS = 3600.0
AUTH_CACHE_SIZE = 256
_BCRYPT_MAX_BYTES = 72  # bcrypt reads no further; Go truncates silently, and so do we
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

OVERLOADED_RETRY_SECONDS = 1

# Failed attempts per client address and user name: a burst of 10, then one every 2 s (30 a
# minute); per address, whatever the names, three times that (a spray over user names).
THROTTLE_BURST = 10.0
THROTTLE_PER_SECOND = 0.5
THROTTLE_ADDRESS_FACTOR = 3.0
THROTTLE_ADDRESSES = 4096  # budgets remembered; the least recently failing is forgotten first

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

    costs: tuple[int, ...]  # every user's cost, in the users' name order
    hashes: Mapping[int, bytes]  # one dummy per configured cost
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
    """Verified credentials, keyed by an HMAC of the client's address, user, hash and password,
    so no password is kept, a changed hash can never hit, and a credential verified from one
    address admits nobody from another. Only successes are cached: every failed guess still
    costs a full bcrypt. An entry is *fresh* for ``ttl`` after its check (admitted without
    bcrypt) and *remembered* for ``remember`` (checked again, but outside the failed-login
    budget)."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float], remember: float = AUTH_REMEMBER_SECONDS) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self.remember = max(ttl, remember)
        self._secret = secrets.token_bytes(32)
        self._entries: dict[bytes, tuple[float, str, bytes]] = {}  # key -> (verified at, user, hash), oldest first
        self._lock = threading.Lock()  # reloads prune from a thread

    def key(self, address: str, user: bytes, hashed: bytes, password: bytes) -> bytes:
        return hmac.new(self._secret, repr((address, user, hashed, password)).encode(), hashlib.sha256).digest()

    def _age(self, key: bytes) -> float | None:
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else self.clock() - entry[0]

    def fresh(self, key: bytes) -> bool:
        age = self._age(key)
        return age is not None and age < self.ttl

    def remembered(self, key: bytes) -> bool:
        age = self._age(key)
        return age is not None and age < self.remember

    def add(self, key: bytes, user: str, hashed: bytes) -> None:
        with self._lock:
            now = self.clock()
            self._entries.pop(key, None)  # re-inserted last: the most recently verified
            while self._entries and (len(self._entries) >= self.size or now - next(iter(self._entries.values()))[0] >= self.remember):
                del self._entries[next(iter(self._entries))]
            self._entries[key] = (now, user, hashed)

    def retain(self, users: Mapping[str, bytes]) -> None:
        """Forget the entries of users removed or rehashed; the others stay verified."""
        with self._lock:
            self._entries = {k: e for k, e in self._entries.items() if users.get(e[1]) == e[2]}

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# --- failed attempts per address and user -------------------------------------------------------


@functools.lru_cache(maxsize=THROTTLE_ADDRESSES)  # a flood asks for the same few addresses
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
    """Token buckets of failed logins: one per (client address, user name) and one per address.
    Each check that runs bcrypt takes a token from both, a success gives them back, so only
    failures drain them; a check is refused while either is empty. Full buckets are not kept;
    past ``size`` the least recently failing is forgotten (its budget starts afresh: an
    attacker with that many addresses is held by the pool's bounds instead)."""

    def __init__(
        self,
        burst: float = THROTTLE_BURST,
        per_second: float = THROTTLE_PER_SECOND,
        size: int = THROTTLE_ADDRESSES,
        clock: Clock = monotonic,
        address_factor: float = THROTTLE_ADDRESS_FACTOR,
    ) -> None:
        self.size, self.clock = size, clock
        self._limits = {False: (burst, per_second), True: (burst * address_factor, per_second * address_factor)}
        self._buckets: dict[tuple[str, bytes | None], tuple[float, float]] = {}  # -> (tokens, when)

    @staticmethod
    def _keys(address: str, user: bytes) -> tuple[tuple[str, bytes | None], tuple[str, bytes | None]]:
        # A digest, not the name: user names are whatever a client sends, up to a header's size.
        return (address, hashlib.blake2b(user, digest_size=16).digest()), (address, None)

    def _tokens(self, key: tuple[str, bytes | None], now: float) -> float:
        burst, rate = self._limits[key[1] is None]
        tokens, when = self._buckets.get(key, (burst, now))
        return min(burst, tokens + (now - when) * rate)

    def retry_after(self, address: str, user: bytes) -> int | None:
        """None within both budgets, else the seconds until the next attempt is allowed."""
        now = self.clock()
        waits = []
        for key in self._keys(address, user):
            tokens = self._tokens(key, now)
            if tokens < 1:
                waits.append(max(1, math.ceil((1 - tokens) / self._limits[key[1] is None][1])))
        return max(waits) if waits else None

    def spend(self, address: str, user: bytes) -> None:
        now = self.clock()
        for key in self._keys(address, user):
            tokens = self._tokens(key, now) - 1
            self._buckets.pop(key, None)  # re-inserted last: most recently failing
            if len(self._buckets) >= self.size:
                del self._buckets[next(iter(self._buckets))]
            self._buckets[key] = (tokens, now)

    def refund(self, address: str, user: bytes) -> None:
        now = self.clock()
        for key in self._keys(address, user):
            tokens = self._tokens(key, now) + 1
            if tokens >= self._limits[key[1] is None][0]:
                self._buckets.pop(key, None)
            else:
                self._buckets[key] = (tokens, now)

    def __len__(self) -> int:
        return len(self._buckets)
