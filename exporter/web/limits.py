"""The connection cap: which connections are admitted, which are refused, and the counts of both.

``web.max_connections`` connections are served as usual. When they are all taken, a new
connection takes the place of the one that has waited longest on its client (for a request,
a body, a handshake), provided it has waited at least ``EVICT_AFTER``: idle or slow connections
cannot hold the exporter, while a client that sends its request at once (a kubelet probe, a
scraper) is answered long before it could be chosen, so a flood of new connections cannot
push it out either. When no connection has waited that long, ``web.health_connections`` more
are admitted on *health slots*, which answer /healthz and /readyz and nothing else (503 and
close). A probe sends its request with its connection, so a health slot whose client has sent
nothing for ``HEALTH_EVICT_AFTER`` is given to the next newcomer: connections that stay silent
cannot hold the health slots, even when an attacker renews all its connections every second to
keep them younger than ``EVICT_AFTER``. When no health slot can be had either, the new
connection is closed at once. Nothing waits in a queue of ours: what the kernel's listen
backlog holds is all.

Pure bookkeeping: the connections themselves (connection.py) say whether they are waiting on
their client and close themselves when evicted.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Protocol

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
TIMEOUT_KINDS = ("header", "body", "idle", "write")
# full: closed at accept, every slot taken; health_only: asked a health slot for another path
# (503); evicted: waited on its client past EVICT_AFTER, closed to admit a newer connection;
# throttled: from an address out of failed-login budget (web config), closed at accept.
REJECT_REASONS = ("full", "health_only", "evicted", "throttled")
# A connection waiting on its client this long may make room for a new one when all are taken.
# Far above what a probe or a scraper needs to send a request, far below any read deadline.
EVICT_AFTER = 1.0
# A health slot's silent client this long may make room: far above the time the event loop
# takes to read a request that came with its connection.
HEALTH_EVICT_AFTER = 0.25


class Pool(enum.Enum):
    REGULAR = "regular"
    HEALTH = "health"


class Slot(Protocol):
    """A connection as the table sees it."""

    def waiting_since(self) -> float | None:
        """When it began waiting on its client (time.monotonic), None while a handler runs."""

    def evict(self) -> None: ...


class ConnectionTable:
    """The open connections by pool, and what the cap and the timeouts closed."""

    def __init__(self, max_connections: int, health_connections: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.max_connections = max_connections
        self.health_connections = health_connections
        self._pools: dict[Pool, dict[Slot, None]] = {Pool.REGULAR: {}, Pool.HEALTH: {}}  # insertion-ordered: oldest first
        self.rejected = dict.fromkeys(REJECT_REASONS, 0)
        self.timeouts = dict.fromkeys(TIMEOUT_KINDS, 0)

    @property
    def open(self) -> int:
        return sum(len(pool) for pool in self._pools.values())

    def connections(self) -> list[Slot]:
        """The open connections, oldest first in each pool."""
        return [slot for slots in self._pools.values() for slot in slots]

    def admit(self, slot: Slot) -> Pool | None:
        """The pool ``slot`` joins, or None: refused (the caller closes it)."""
        if len(self._pools[Pool.REGULAR]) < self.max_connections:
            return self._join(Pool.REGULAR, slot)
        victim = self._longest_waiting(tuple(Pool), EVICT_AFTER)
        if victim is None and len(self._pools[Pool.HEALTH]) < self.health_connections:
            return self._join(Pool.HEALTH, slot)
        victim = victim or self._longest_waiting((Pool.HEALTH,), HEALTH_EVICT_AFTER)
        if victim is not None:
            pool, old = victim
            self.remove(old)
            self.count_rejected("evicted")
            old.evict()
            return self._join(pool, slot)
        self.count_rejected("full")
        return None

    def _longest_waiting(self, pools: tuple[Pool, ...], after: float) -> tuple[Pool, Slot] | None:
        """The connection of ``pools`` that has waited longest on its client, if past ``after``."""
        oldest: tuple[float, Pool, Slot] | None = None
        for pool in pools:
            for slot in self._pools[pool]:
                since = slot.waiting_since()
                if since is not None and (oldest is None or since < oldest[0]):
                    oldest = (since, pool, slot)
        if oldest is None or self.clock() - oldest[0] < after:
            return None
        return oldest[1], oldest[2]

    def _join(self, pool: Pool, slot: Slot) -> Pool:
        self._pools[pool][slot] = None
        return pool

    def remove(self, slot: Slot) -> None:
        """Forget ``slot``; closing paths may call it more than once."""
        for pool in self._pools.values():
            pool.pop(slot, None)

    def count_rejected(self, reason: str) -> None:
        self.rejected[reason] += 1

    def count_timeout(self, kind: str) -> None:
        self.timeouts[kind] += 1
