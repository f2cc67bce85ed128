"""The connection cap and the per-address bounds: which connections are admitted, which are
refused, and the counts of both.

Whenever a connection must make room, the victims are taken in tiers, the first tier that has
one giving it: connections that never sent a byte, then those that spoke but never completed a
request (half-sent headers, a stalled body), then those that completed one (an idle scraper, a
training hook's or a probe's keep-alive connection); in each tier the one that has waited
longest on its client. A newcomer that has not spoken yet only ever takes the place of a
connection that has not spoken either: a flood of silent connections cannot push out a client
that was served.

``web.max_connections`` connections are served as usual. No address holds more than
``web.max_connections_per_address`` of them: past that, its own connection first in the tiers
(that has waited ``HEALTH_EVICT_AFTER`` at least) makes room, so a probe from a busy address
still gets through; else the newcomer is closed (the listener lets a silent newcomer at its
address's cap wait in the lobby for its first byte instead). When every slot is taken, a new
connection that has sent nothing yet waits for its first byte in the lobby (lobby.py), holding
no slot; one that has spoken takes the place of:

1. the first in the tiers of the address holding the most (``HEALTH_EVICT_AFTER`` at least),
   when that address holds more than the newcomer's would (fair share: a flood from a few
   addresses cannot push out a scraper, whose one connection is never the most);
2. else the first in the tiers of all connections, provided it has waited at least
   ``EVICT_AFTER`` (a client that sends its request at once is answered long before);
3. else, when the newcomer has already sent bytes (its request is waiting in the socket: a
   probe, a scraper reconnecting), the longest-silent connection that has never sent a byte,
   however young, regular slots first (hundreds of new silent connections a second, each
   renewed before any grace runs out, would otherwise hold every slot for good);
4. else a *health slot* (``web.health_connections`` more), which answers /healthz and /readyz
   and nothing else (503 and close); a health slot silent for ``HEALTH_EVICT_AFTER`` goes to
   the next newcomer;
5. else, for a probe (a plain-HTTP /healthz or /readyz request already in its socket), the
   health slot held longest by a connection that is not a probe, however young: it would only
   be answered 503, while hostile newcomers taking every health slot as it frees would
   otherwise turn the probes away;
6. else the new connection is closed at once.

A connection waits on its client while it reads a request and while it is kept alive between
requests, except once a request on it has passed basic auth: a scraper between its scrapes is not
waiting, and only ``web.idle_timeout`` closes it.

Before any of this, :class:`AddressRates` caps how many new connections an address may open a
second (a token bucket), so churn is turned away at accept, before it costs a slot. Besides the
lobby's bounded wait for a first byte, nothing waits in a queue of ours: what the kernel's
listen backlog holds is all.

Pure bookkeeping: the connections themselves (guard.py) say whether they are waiting on their
client, whether they spoke and were served, and close themselves when evicted.
"""

from __future__ import annotations

import enum
import sys
import time
from collections.abc import Callable
from typing import Protocol

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
TIMEOUT_KINDS = ("header", "body", "idle", "write")
# full: closed at accept, every slot taken; health_only: asked a health slot for another path
# (503); evicted: closed to admit a newer connection; rate_limited: the address opened new
# connections faster than web.new_connections_per_second, closed at accept.
REJECT_REASONS = ("full", "health_only", "evicted", "rate_limited")
# A connection waiting on its client this long may make room for a new one when all are taken.
# Far above what a probe or a scraper needs to send a request, far below any read deadline.
EVICT_AFTER = 1.0
# A health slot's silent client this long may make room, and so may the connection of an address
# over its share: far above the time the event loop takes to read a request that came with its
# connection.
HEALTH_EVICT_AFTER = 0.25
# Addresses whose token buckets are remembered at most; past it, full buckets are forgotten
# (they hold nothing), then the oldest, so a flood of source addresses costs bounded memory.
MAX_TRACKED_ADDRESSES = 4096


class Pool(enum.Enum):
    REGULAR = "regular"
    HEALTH = "health"


class Slot(Protocol):
    """A connection as the table sees it."""

    @property
    def address(self) -> str | None:
        """The client's address (None: unknown, counted as one address)."""

    def waiting_since(self) -> float | None:
        """When it began waiting on its client (time.monotonic), None while a handler runs."""

    def silent(self) -> bool:
        """Whether its client has sent nothing at all yet."""

    def served(self) -> bool:
        """Whether a request on it was answered (a scraper, a hook, a probe kept alive)."""

    def evict(self) -> None: ...


class ConnectionTable:
    """The open connections by pool and by address, and what the cap and the timeouts closed."""

    def __init__(
        self, max_connections: int, health_connections: int, per_address: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.clock = clock
        self.max_connections = max_connections
        self.health_connections = health_connections
        self.per_address = per_address or sys.maxsize  # None: no cap of its own
        self._pools: dict[Pool, dict[Slot, None]] = {Pool.REGULAR: {}, Pool.HEALTH: {}}  # insertion-ordered: oldest first
        self._by_address: dict[str | None, dict[Slot, None]] = {}
        self._probes: dict[Slot, None] = {}  # admitted with a health request in their socket
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        self.timeouts = dict.fromkeys(TIMEOUT_KINDS, 0)

    @property
    def full(self) -> bool:
        """Every regular slot taken."""
        return len(self._pools[Pool.REGULAR]) >= self.max_connections

    @property
    def open(self) -> int:
        return sum(len(pool) for pool in self._pools.values())

    def connections(self) -> list[Slot]:
        """The open connections, oldest first in each pool."""
        return [slot for slots in self._pools.values() for slot in slots]

    def at_cap(self, address: str | None) -> bool:
        """Whether ``address`` holds its share already (a newcomer of it must make room)."""
        return len(self._by_address.get(address, ())) >= self.per_address

    def admit(self, slot: Slot, talking: bool = False, probe: bool = False) -> Pool | None:
        """The pool ``slot`` joins, or None: refused (the caller closes it). ``talking``: its
        client has sent bytes already (else it may only take the place of a silent one);
        ``probe``: they begin a health request (it may take a health slot from a non-probe)."""
        pool = self._admit(slot, talking, probe)
        if pool is not None and probe:
            self._probes[slot] = None
        return pool

    def _admit(self, slot: Slot, talking: bool, probe: bool) -> Pool | None:
        own = self._by_address.get(slot.address, {})
        if len(own) >= self.per_address:
            return self._replace(self._victim(own, HEALTH_EVICT_AFTER, talking), slot)
        if len(self._pools[Pool.REGULAR]) < self.max_connections:
            return self._join(Pool.REGULAR, slot)
        heaviest = max(self._by_address.values(), key=len, default={})
        victim = self._victim(heaviest, HEALTH_EVICT_AFTER, talking) if len(heaviest) > len(own) + 1 else None
        victim = victim or self._victim(self.connections(), EVICT_AFTER, talking)
        if victim is None and talking:
            victim = self._longest_silent(self._pools[Pool.REGULAR]) or self._longest_silent(self._pools[Pool.HEALTH])
        if victim is None and len(self._pools[Pool.HEALTH]) < self.health_connections:
            return self._join(Pool.HEALTH, slot)
        victim = victim or self._longest_waiting(self._pools[Pool.HEALTH], HEALTH_EVICT_AFTER)
        if victim is None and probe:
            victim = next((held for held in self._pools[Pool.HEALTH] if held not in self._probes), None)
        return self._replace(victim, slot)

    def _replace(self, victim: Slot | None, slot: Slot) -> Pool | None:
        if victim is None:
            self.count_rejected("full")
            return None
        pool = Pool.HEALTH if victim in self._pools[Pool.HEALTH] else Pool.REGULAR
        self.remove(victim)
        self.count_rejected("evicted")
        victim.evict()
        return self._join(pool, slot)

    def _longest_waiting(self, slots: dict[Slot, None] | list[Slot], after: float) -> Slot | None:
        """The one of ``slots`` that has waited longest on its client, if past ``after``."""
        oldest: tuple[float, Slot] | None = None
        for slot in slots:
            since = slot.waiting_since()
            if since is not None and (oldest is None or since < oldest[0]):
                oldest = (since, slot)
        if oldest is None or self.clock() - oldest[0] < after:
            return None
        return oldest[1]

    def _victim(self, slots: dict[Slot, None] | list[Slot], after: float, talking: bool) -> Slot | None:
        """The first of ``slots`` in the tiers (never spoke, spoke, served) that has waited on its
        client past ``after``; for a newcomer that has not spoken (``talking`` false), only the
        first tier."""
        silent: list[Slot] = []
        spoke: list[Slot] = []
        served: list[Slot] = []
        for slot in slots:
            (silent if slot.silent() else served if slot.served() else spoke).append(slot)
        tiers = (silent, spoke, served) if talking else (silent,)
        for tier in tiers:
            victim = self._longest_waiting(tier, after)
            if victim is not None:
                return victim
        return None

    def _longest_silent(self, slots: dict[Slot, None]) -> Slot | None:
        return self._longest_waiting([slot for slot in slots if slot.silent()], 0.0)

    def _join(self, pool: Pool, slot: Slot) -> Pool:
        self._pools[pool][slot] = None
        self._by_address.setdefault(slot.address, {})[slot] = None
        return pool

    def remove(self, slot: Slot) -> None:
        """Forget ``slot``; closing paths may call it more than once."""
        for pool in self._pools.values():
            pool.pop(slot, None)
        self._probes.pop(slot, None)
        own = self._by_address.get(slot.address)
        if own is not None:
            own.pop(slot, None)
            if not own:
                del self._by_address[slot.address]

    def count_rejected(self, reason: str) -> None:
        self.rejected[reason] += 1

    def count_timeout(self, kind: str) -> None:
        self.timeouts[kind] += 1


class AddressRates:
    """New connections per address: a token bucket of ``burst`` refilled at ``rate`` a second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str | None, tuple[float, float]] = {}  # address -> (tokens, when)

    def allow(self, address: str | None) -> bool:
        """Whether ``address`` may open one more connection now (and take its token)."""
        now = self.clock()
        tokens, when = self._buckets.pop(address, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - when) * self.rate)
        if len(self._buckets) >= MAX_TRACKED_ADDRESSES:
            self._forget(now)
        allowed = tokens >= 1.0
        self._buckets[address] = (tokens - 1.0 if allowed else tokens, now)  # re-inserted: newest last
        return allowed

    def _forget(self, now: float) -> None:
        """Full buckets say nothing; if all hold something, the oldest half goes (amortised)."""
        refill = self.burst / self.rate
        self._buckets = {a: b for a, b in self._buckets.items() if now - b[1] < refill}
        if len(self._buckets) >= MAX_TRACKED_ADDRESSES:
            self._buckets = dict(list(self._buckets.items())[MAX_TRACKED_ADDRESSES // 2 :])
