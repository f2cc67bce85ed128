"""Admission to the ingest store (pure): the limits a new (job_name, rank) must fit and, when
it does not, which held ranks give way.

Anyone who can reach the port may POST, so a full store must not lock real jobs out: only a
batch that carries steps may take a place, and only from ranks that are not working (closed,
no step yet, or none for ``idle_after``). A rank that keeps reporting steps is never evicted,
so names kept alive by one empty POST per TTL cannot keep a training job out, and one client
address cannot take more than its share (loopback, the node's own processes, has none: on a
host without containers every job comes from there).

The store hands in what it holds and applies the plan; a refused batch changes nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from exporter.jobs.metrics import SERIES_PER_RANK
from exporter.jobs.validate import IngestError, IngestLimits

Key = tuple[str, int]


class Held(Protocol):
    """What admission reads of a held rank (the store's RankState)."""

    job_name: str
    rank: int
    client: str  # "" : outside the per-client limits
    finished: bool
    first_seen: float  # monotonic, when it was admitted
    last_step: float | None  # monotonic arrival of its latest batch with steps


@dataclass(frozen=True)
class Newcomer:
    job_name: str
    client: str
    has_steps: bool


@dataclass(frozen=True)
class Eviction:
    key: Key
    reason: str  # the limit that was full (metrics.ADMISSION_REASONS)


def client_key(remote: str | None) -> str:
    """The per-client identity of a peer address; "" (no per-client limit) for loopback and
    for a peer that is not an IP address."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return "" if address.is_loopback else str(address)


def idle(held: Held, now: float, idle_after: float) -> bool:
    """Not working: closed, no step yet, or no step for ``idle_after``."""
    return held.finished or held.last_step is None or now - held.last_step > idle_after


def eviction_order(held: Held) -> tuple[int, float]:
    """Closed ranks first, then ranks that never reported a step (oldest first), then the ones
    quiet longest: a stalled job keeps its series (and its stall alert) the longest."""
    if held.finished:
        return 0, held.last_step or held.first_seen
    if held.last_step is None:
        return 1, held.first_seen
    return 2, held.last_step


def _key(held: Held) -> Key:
    return held.job_name, held.rank


_RETRY = "; retry later (a batch with steps takes the place of ranks idle for ingest.idle_after)"


class _Plan:
    """The ranks still held if the evictions chosen so far happen."""

    def __init__(self, held: Iterable[Held], new: Newcomer, limits: IngestLimits, now: float) -> None:
        self.live = list(held)
        self.new, self.limits, self.now = new, limits, now
        self.evictions: list[Eviction] = []

    def _may_evict(self, held: Held) -> bool:
        # A heartbeat-only newcomer never displaces anyone: that is what a flood sends.
        return self.new.has_steps and idle(held, self.now, self.limits.idle_after)

    def _evict(self, victims: list[Held], reason: str) -> None:
        keys = {_key(h) for h in victims}
        self.live = [h for h in self.live if _key(h) not in keys]
        self.evictions += [Eviction(key, reason) for key in sorted(keys)]

    def fit_job(self, within: Callable[[Held], bool], limit: int, reason: str, message: str) -> None:
        """Room for the newcomer's job among the ranks ``within`` selects: when it is not there
        yet and they hold ``limit`` jobs, a job all of whose selected ranks are idle gives way."""
        while True:
            jobs: dict[str, list[Held]] = {}
            for held in filter(within, self.live):
                jobs.setdefault(held.job_name, []).append(held)
            if self.new.job_name in jobs or len(jobs) < limit:
                return
            idle_jobs = [ranks for ranks in jobs.values() if all(map(self._may_evict, ranks))]
            if not idle_jobs:
                raise IngestError(429, reason, message + _RETRY)
            self._evict(min(idle_jobs, key=lambda ranks: max(map(eviction_order, ranks))), reason)

    def fit_rank(self, within: Callable[[Held], bool], limit: int, reason: str, message: str) -> None:
        """Room for one more rank among those ``within`` selects: below ``limit``, else the
        first idle one in eviction order gives way."""
        while sum(map(within, self.live)) >= limit:
            idle_ranks = [held for held in self.live if within(held) and self._may_evict(held)]
            if not idle_ranks:
                raise IngestError(429, reason, message + _RETRY)
            self._evict([min(idle_ranks, key=eviction_order)], reason)


def plan(held: Iterable[Held], new: Newcomer, limits: IngestLimits, now: float) -> tuple[Eviction, ...]:
    """The evictions that make room for ``new`` (often none); IngestError (429) naming the
    first limit that cannot be met."""
    p, job, client = _Plan(held, new, limits, now), new.job_name, new.client
    same_job = lambda h: h.job_name == job  # noqa: E731
    same_client = lambda h: h.client == client  # noqa: E731
    p.fit_job(
        lambda h: True,
        limits.max_jobs,
        "too_many_jobs",
        f"already tracking {limits.max_jobs} jobs (ingest.max_jobs); {job!r} is not admitted",
    )
    if client:
        p.fit_job(
            same_client,
            limits.max_jobs_per_client,
            "per_client_limit",
            f"{client} already holds ranks of {limits.max_jobs_per_client} jobs (ingest.max_jobs_per_client)",
        )
    p.fit_rank(same_job, limits.max_ranks, "too_many_ranks", f"job {job!r} already has {limits.max_ranks} ranks here (ingest.max_ranks)")
    if client:
        p.fit_rank(
            same_client,
            limits.max_ranks_per_client,
            "per_client_limit",
            f"{client} already holds {limits.max_ranks_per_client} ranks (ingest.max_ranks_per_client)",
        )
    p.fit_rank(
        lambda h: True,
        limits.max_series // SERIES_PER_RANK,
        "series_budget",
        f"another rank would exceed ingest.max_series ({limits.max_series} series, {SERIES_PER_RANK} per rank)",
    )
    return tuple(p.evictions)
