"""Findings that compare or qualify a job's ranks: the straggler of a multi-rank job, the data
phase, and which ranks run on no chip (CPU jobs: the NPU advice does not apply). Pure: job
observations and the threshold table in, findings out."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from exporter.diagnostics.model import MESO, RATIO, Finding, JobStats
from exporter.thresholds.table import WARNING, Thresholds

STRAGGLER_ALERT = "NPUJobStragglerRank"
# The data phase is host time the device waits through: judged with the idle-share bounds.
DATA_INDICATOR = "idle_share"


def busy_per_iteration(job: JobStats) -> float | None:
    """Seconds per iteration outside communication (the alert's measure): in synchronous data
    parallel the others wait for the straggler in their collectives."""
    if job.iteration_seconds is None:
        return None
    return job.iteration_seconds * (1.0 - (job.phase("communication") or 0.0))


def straggler_findings(jobs: Sequence[JobStats], table: Thresholds) -> list[Finding]:
    """Per job with at least the alert's min_ranks ranks (on any instance): the rank whose time
    outside communication exceeds the job's median by more than the alert's threshold."""
    spec = table.find(STRAGGLER_ALERT)
    if spec is None or spec.threshold is None:
        return []
    by_job: dict[str, list[tuple[JobStats, float]]] = {}
    for job in jobs:
        busy = busy_per_iteration(job)
        if busy is not None and busy > 0:
            by_job.setdefault(job.job_name, []).append((job, busy))
    out = []
    for _job, ranks in sorted(by_job.items()):
        if len(ranks) < int(spec.param("min_ranks", 2)):
            continue
        median = statistics.median(busy for _, busy in ranks)
        for job, busy in ranks:
            if busy > (1 + spec.threshold) * median:
                out.append(_straggler(job, busy, median, len(ranks), spec.threshold))
    return out


def _straggler(job: JobStats, busy: float, median: float, ranks: int, threshold: float) -> Finding:
    chip = f"device {job.device}" if job.device else "no chip (CPU)" if job.device == "" else "chip unknown"
    where = job.instance or "this exporter"
    return Finding(
        MESO,
        "straggler",
        "Straggler rank (time per iteration outside communication, vs the job's median)",
        f"{job.subject}, {chip}",
        busy / median,
        RATIO,
        WARNING,
        None,
        STRAGGLER_ALERT,
        f"abnormal > {1 + threshold:.0%} of the median of the job's ranks ({STRAGGLER_ALERT})",
        (
            f"straggler: rank {job.rank} of job {job.job_name} on {where}, {chip}, spends {busy * 1000:.3g} ms per "
            f"iteration outside communication, {busy / median:.2f}x the median {median * 1000:.3g} ms of the job's "
            f"{ranks} ranks: the others wait for it. Compare its data and compute phases with a healthy rank's; "
            "check its chip (clock, temperature) and its host (data loader workers, CPU binding)."
        ),
    )


def data_finding(job: JobStats, table: Thresholds) -> Finding | None:
    share = job.phase("data")
    if share is None or DATA_INDICATOR not in table:
        return None
    indicator = table[DATA_INDICATOR]
    bounds = f"healthy {indicator.healthy_text()}" if indicator.healthy_text() else ""
    return Finding(
        MESO,
        "phase.data",
        "data share of the step",
        job.subject,
        share,
        RATIO,
        indicator.verdict(share),
        DATA_INDICATOR,
        None,
        bounds,
        (
            "time the step waits for its input, during which the device idles: judged with the device idle "
            f"share's bounds ({indicator.source}); hide it with more loader workers, prefetching, pinned memory"
        ),
    )


def cpu_ranks(jobs: Iterable[JobStats]) -> set[tuple[str, str]]:
    """(job_name, rank) of ranks that report no chip (npu_job_info device ""): CPU jobs."""
    return {(job.job_name, job.rank) for job in jobs if job.device == ""}
