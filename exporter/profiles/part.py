"""The profiles part of the snapshot: the latest finished profile of each job and rank."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.profiles.indicators import ProfileSummary


@dataclass(frozen=True)
class ProfilesPart:
    summaries: tuple[ProfileSummary, ...] = ()   # one per (job_name, rank), ordered by both


def latest_per_rank(summaries: Iterable[ProfileSummary]) -> tuple[ProfileSummary, ...]:
    """One summary per (job_name, rank): the most recently produced export wins."""
    best: dict[tuple[str, int | None], ProfileSummary] = {}
    for summary in summaries:
        key = (summary.job_name, summary.rank)
        old = best.get(key)
        if old is None or (summary.finished_at or 0.0, summary.path) > (old.finished_at or 0.0, old.path):
            best[key] = summary
    return tuple(best[k] for k in sorted(best, key=lambda k: (k[0], k[1] is None, k[1] or 0)))


