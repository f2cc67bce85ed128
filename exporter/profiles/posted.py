"""Profile summaries the training hooks POST (/api/v1/profiles): held per job and rank, served
with the watched exports as one set of npu_profile_* series.

A posted summary and a watched export of the same job and rank are one series set: the one
produced last wins, as between two exports. Posted summaries are bounded like the ingest's
ranks (jobs, ranks per job, ranks per client address) and leave after ``max_age`` (the age
at which the profile alerts stop reading a profile), so a job that stopped profiling does
not stay on /metrics for ever. A new job when ``max_jobs`` are held takes the place of the
job whose latest summary is the oldest (a finished job must not keep every later one out
until it ages out); ranks per job and per client are refused past their bounds. The store is touched on the event loop; the lock only guards
a scrape reading it from another thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from exporter.core.registration import Shared
from exporter.profiles.indicators import ProfileSummary
from exporter.profiles.part import ProfileSample, ProfilesPart

MAX_AGE = 86_400.0  # seconds: the default profile_max_age of the alert rules


@dataclass(frozen=True)
class PostedLimits:
    max_jobs: int = 8
    max_ranks: int = 16  # per job
    max_ranks_per_client: int = 32  # per remote address; loopback is not limited
    max_age: float = MAX_AGE
    top_k: int = 5  # operator types served per summary (profiles.top_k)


class PostedProfiles:
    def __init__(self, limits: PostedLimits = PostedLimits(), clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self.clock = clock
        self._entries: dict[tuple[str, int | None], tuple[ProfileSummary, str]] = {}  # -> (summary, client)
        self._lock = threading.Lock()
        self.evicted_jobs = 0  # jobs removed to make room for a new one, so far

    def offer(self, summary: ProfileSummary, client: str = "") -> str | None:
        """Hold ``summary`` (replacing its job and rank's); the admission reason when it does not
        fit (``too_many_ranks``, ``per_client_limit``), nothing changed then. A new job past
        ``max_jobs`` evicts the job with the oldest latest summary (counted in ``evicted_jobs``).
        ``client`` is the address key of the sender, "" for loopback."""
        with self._lock:
            self._expire()
            key = (summary.job_name, summary.rank)
            if key not in self._entries:
                reason = self._refusal(summary.job_name, client)
                if reason is not None:
                    return reason
                self._make_room(summary.job_name)
            self._entries[key] = (replace(summary, top_operators=summary.top_operators[: self.limits.top_k]), client)
            return None

    def _refusal(self, job_name: str, client: str) -> str | None:
        if sum(1 for job, _ in self._entries if job == job_name) >= self.limits.max_ranks:
            return "too_many_ranks"
        if client and sum(1 for _, c in self._entries.values() if c == client) >= self.limits.max_ranks_per_client:
            return "per_client_limit"
        return None

    def _make_room(self, job_name: str) -> None:
        """Evict the jobs whose latest summary is oldest until ``job_name`` fits."""
        latest: dict[str, float] = {}
        for (job, _), (summary, _) in self._entries.items():
            latest[job] = max(latest.get(job, float("-inf")), summary.finished_at or 0.0)
        if job_name in latest:
            return
        for job in sorted(latest, key=lambda j: (latest[j], j))[: max(0, len(latest) - self.limits.max_jobs + 1)]:
            for key in [k for k in self._entries if k[0] == job]:
                del self._entries[key]
            self.evicted_jobs += 1

    def _expire(self) -> None:
        oldest = self.clock() - self.limits.max_age
        for key, (summary, _) in list(self._entries.items()):
            if (summary.finished_at or 0.0) < oldest:
                del self._entries[key]

    def forget(self, job_name: str, rank: int) -> None:
        """The ingest dropped this rank (closed and past ingest.finished_ttl, or silent past
        ingest.ttl): its summaries go with it, not a day later."""
        with self._lock:
            self._entries.pop((job_name, rank), None)

    def summaries(self) -> tuple[ProfileSummary, ...]:
        with self._lock:
            self._expire()
            return tuple(summary for summary, _ in self._entries.values())


# The hooks' summaries: made by the ingest's registration (jobs/registration.py), which feeds
# them, and merged into the profiles part by this package's.
POSTED = Shared("posted profiles", PostedProfiles)


def merged(part: ProfilesPart | None, posted: Iterable[ProfileSummary]) -> ProfilesPart:
    """``part`` (the watched exports) with the posted summaries: per job and rank the one produced last."""
    part = part if part is not None else ProfilesPart()
    best: dict[tuple[str, int | None], ProfileSample] = {(s.job_name, s.rank): s for s in part.samples}
    changed = False
    for summary in posted:
        key = (summary.job_name, summary.rank)
        old = best.get(key)
        if old is None or (summary.finished_at or 0.0) > (old.finished_at or 0.0):
            best[key] = ProfileSample.of(summary)
            changed = True
    if not changed:
        return part
    order = sorted(best, key=lambda k: (k[0], k[1] is None, k[1] or 0))
    return replace(part, samples=tuple(best[k] for k in order))
