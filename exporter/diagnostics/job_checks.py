"""`diagnose`'s checks of each training process the hooks report: idle time between iterations,
model FLOPs utilization and stalls (macro level), the rates and the share of each phase of the
step (meso level); a process younger than the alerts' look-back is shown, not judged. Pure: job
statistics and the threshold table in, findings out (the ranks compared with each other:
job_ranks.py; goodput and the largest badput: goodput_checks.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from exporter.diagnostics import job_ranks
from exporter.diagnostics.goodput_checks import goodput_findings
from exporter.diagnostics.model import MACRO, MESO, PER_SECOND, RATIO, SECONDS, Finding, JobStats
from exporter.diagnostics.verdicts import duration, judge, judged
from exporter.jobs.phases import STAGES, stage_of
from exporter.thresholds.table import ABNORMAL, HEALTHY, Thresholds, duration_seconds

MEMCPY_PHASES = ("h2d", "d2h")


def job_findings(jobs: Iterable[JobStats], table: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    minimum = min_job_age(table)
    for job in jobs:
        young = job.lifetime is not None and job.lifetime < minimum
        found = job_macro(job, table) + job_meso(job, table)
        if young:
            found = [
                f
                if f.check == "stall" or f.verdict is None
                else unjudged(f, f"too young to judge: {duration(job.lifetime or 0)} of iterations, under {duration(minimum)}")
                for f in found
            ]
        out += ([age_finding(job, minimum)] if job.lifetime is not None else []) + found
    return out


def min_job_age(table: Thresholds) -> float:
    """A job is judged once it has run as long as the alerts on its steps look back
    (NPUIdleGapsHigh's range, 5m): younger, its shares and gaps are noise of its start."""
    spec = table.find("NPUIdleGapsHigh")
    return duration_seconds(spec.range) if spec is not None and spec.range else 300.0


def age_finding(job: JobStats, minimum: float) -> Finding:
    lifetime = job.lifetime or 0.0
    whole = job.window is not None and lifetime >= 0.95 * job.window
    detail = (
        "iterating over the whole window"
        if whole
        else f"judged over its own {duration(lifetime)} of iterations in the window, not the whole window"
    )
    if lifetime < minimum:
        detail = f"too young to judge (under {duration(minimum)}): its numbers are shown, not judged"
    return Finding(MACRO, "job_age", "Iterating for (in the window)", job.subject, lifetime, SECONDS, detail=detail)


def unjudged(finding: Finding, why: str) -> Finding:
    return replace(finding, verdict=None, bounds="", detail=why)


def job_macro(job: JobStats, table: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    if job.busy_ratio is not None and (job.iterations_per_second or 0) > 0:
        idle = min(1.0, max(0.0, 1.0 - job.busy_ratio))
        detail = "share of wall time outside the reported iterations"
        out.append(judged(MACRO, "idle_gaps", "Idle time between iterations", job.subject, idle, "idle_share", table, detail))
    mfu = mfu_finding(job, table)
    if mfu is not None:
        out.append(mfu)
    out += goodput_findings(job, table)
    stall = table.find("NPUTrainingStalled")
    if job.seconds_since_last_iteration is not None:
        age = max(0.0, job.seconds_since_last_iteration)
        verdict, bounds = None, ""
        if stall is not None and stall.threshold is not None:
            verdict = ABNORMAL if age > stall.threshold else HEALTHY
            bounds = f"abnormal > {duration(stall.threshold)} (NPUTrainingStalled)"
        out.append(
            Finding(
                MACRO,
                "stall",
                "Time since the last iteration",
                job.subject,
                age,
                SECONDS,
                verdict,
                None,
                "NPUTrainingStalled" if stall else None,
                bounds,
                "the loop is stuck (hung collective, dead data loader, deadlock)" if verdict == ABNORMAL else "",
            )
        )
    return out


MFU = "model_flops_utilization"
NAMED_WITHOUT_MFU = 5


def mfu_finding(job: JobStats, table: Thresholds) -> Finding | None:
    """MFU against the table's band: below it a warning (advice: batch, fusion, host overhead),
    above its ceiling a healthy value with a word on the declared FLOPs."""
    if job.mfu is None:
        return None
    verdict, bounds, _ = judge(table, MFU, job.mfu)
    detail = "model FLOPs of its steps / their time / the chip's peak FLOP/s at the job's precision"
    ceiling = table[MFU].ceiling if MFU in table else None
    if ceiling is not None:
        bounds += f", commonly up to {ceiling * 100:g}%"
        if job.mfu > ceiling:
            detail = f"above the {ceiling * 100:g}% large-model training commonly reaches: check the FLOPs the loop declares"
    return Finding(MACRO, "mfu", "Model FLOPs utilization", job.subject, job.mfu, RATIO, verdict, MFU, None, bounds, detail)


def mfu_notes(jobs: Iterable[JobStats]) -> list[str]:
    """One note for every rank on a chip without MFU (no FLOPs declared, or no peak for its chip)."""
    missing = [j.subject for j in jobs if j.mfu is None and j.device != ""]
    if not missing:
        return []
    named = ", ".join(missing[:NAMED_WITHOUT_MFU]) + (
        f" and {len(missing) - NAMED_WITHOUT_MFU} more" if len(missing) > NAMED_WITHOUT_MFU else ""
    )
    return [
        f"no model FLOPs utilization for {named}: the loop declares no FLOPs (flops_per_step=, step(flops=), "
        "TorchMonitor(measure_flops=True)) or the exporter has no peak FLOP/s for its chip at its precision "
        "(npu_peak_flops_per_second; npu_smi.peak_flops)"
    ]


def job_meso(job: JobStats, table: Thresholds) -> list[Finding]:
    out = _job_rates(job)
    shares = stage_shares(job.phase_shares)
    if "data" in shares:  # the data stage as a whole, judged
        plain = Finding(MESO, "phase.data", "data share of the step", job.subject, shares["data"], RATIO)
        out.append(job_ranks.data_finding(job, table) or plain)
    for word, share in sorted(job.phase_shares, key=lambda ws: (STAGES.index(stage_of(ws[0])), ws[0])):
        stage = stage_of(word)  # the loop's own word, its stage beside it
        if word != "data":
            title = f"{word} share of the step" if word == stage else f"{word} share of the step ({stage})"
            out.append(Finding(MESO, f"phase.{word}", title, job.subject, share, RATIO))
    copies = [shares[p] for p in MEMCPY_PHASES if p in shares]
    if copies:
        out.append(judged(MESO, "memcpy_share", "Memory copy share (h2d + d2h)", job.subject, sum(copies), "memcpy_share", table))
    if "framework" in shares:
        title = "Framework overhead share"
        out.append(judged(MESO, "framework_share", title, job.subject, shares["framework"], "framework_overhead_share", table))
    return out


def stage_shares(phase_shares: tuple[tuple[str, float], ...]) -> dict[str, float]:
    """Shares per stage from shares per phase word (forward and backward are both compute)."""
    out: dict[str, float] = {}
    for word, share in phase_shares:
        out[stage_of(word)] = out.get(stage_of(word), 0.0) + share
    return out


def _job_rates(job: JobStats) -> list[Finding]:
    rows = (
        ("iteration_time", "Mean iteration time", job.iteration_seconds, SECONDS),
        ("iteration_rate", "Iterations per second", job.iterations_per_second, PER_SECOND),
        ("throughput", "Throughput (samples per second)", job.samples_per_second, PER_SECOND),
    )
    return [Finding(MESO, check, title, job.subject, value, unit) for check, title, value, unit in rows if value is not None]
