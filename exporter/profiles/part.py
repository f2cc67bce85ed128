"""The profiles part of the snapshot: the latest finished profile of each job and rank, with
exactly the indicators /metrics serves (the `profile` command and `diagnose` read the fuller
ProfileSummary)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.core.snapshot import PartKey
from exporter.profiles.indicators import OperatorShare, ProfileSummary


@dataclass(frozen=True)
class ProfileSample:
    """One rank's latest profile; ratios 0..1, None where the export holds nothing to compute it from."""

    job_name: str
    rank: int | None
    finished_at: float | None  # unix time the export was produced
    step_duration_seconds: float | None = None
    compute_ratio: float | None = None
    communication_ratio: float | None = None
    idle_ratio: float | None = None
    memcpy_ratio: float | None = None
    memcpy_kind_ratios: tuple[tuple[str, float], ...] = ()
    framework_overhead_ratio: float | None = None
    top3_operator_ratio: float | None = None
    max_operator_ratio: float | None = None
    top_operators: tuple[OperatorShare, ...] = ()  # the top-k operator types, largest first

    @classmethod
    def of(cls, s: ProfileSummary) -> ProfileSample:
        return cls(
            s.job_name,
            s.rank,
            s.finished_at,
            s.step_duration_seconds,
            s.compute_ratio,
            s.communication_ratio,
            s.idle_ratio,
            s.memcpy_ratio,
            s.memcpy_kind_ratios,
            s.framework_overhead_ratio,
            s.top3_operator_ratio,
            s.max_operator_ratio,
            s.top_operators,
        )


# Why an export was dropped: more than profiles.max_exports exports, or more than
# profiles.max_jobs job names, would be held.
DROP_REASONS = ("max_exports", "max_jobs")


@dataclass(frozen=True)
class ProfilesPart:
    samples: tuple[ProfileSample, ...] = ()  # one per (job_name, rank), ordered by both
    dropped: tuple[tuple[str, int], ...] = tuple((r, 0) for r in DROP_REASONS)  # exports dropped by reason, since start

    @classmethod
    def latest(cls, summaries: Iterable[ProfileSummary], dropped: tuple[tuple[str, int], ...] | None = None) -> ProfilesPart:
        """The part of these summaries: the latest of each job and rank."""
        samples = tuple(ProfileSample.of(s) for s in latest_per_rank(summaries))
        return cls(samples) if dropped is None else cls(samples, dropped)


def latest_per_rank(summaries: Iterable[ProfileSummary]) -> tuple[ProfileSummary, ...]:
    """One summary per (job_name, rank): the most recently produced export wins."""
    best: dict[tuple[str, int | None], ProfileSummary] = {}
    for summary in summaries:
        key = (summary.job_name, summary.rank)
        old = best.get(key)
        if old is None or (summary.finished_at or 0.0, summary.path) > (old.finished_at or 0.0, old.path):
            best[key] = summary
    return tuple(best[k] for k in sorted(best, key=lambda k: (k[0], k[1] is None, k[1] or 0)))


PROFILES = PartKey("profiles", ProfilesPart)  # its snapshot key
