"""The three levels of docs/tuning.md as pure functions, after a hardware level that asks
whether the chip itself is sound: observations + threshold table in, findings out. No I/O, no
clock (the readers already turned timestamps into ages).

Where the table has a row for an indicator, its bounds give the verdict and its causes and
levers the advice. Where a check is an alert without a row (saw-tooth, stall), the alert's
threshold from the same table gives the verdict, so `diagnose` and the alerts agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace

from exporter.diagnostics import hardware, job_ranks, profile_indicators
from exporter.diagnostics.model import (
    HARDWARE,
    MACRO,
    MESO,
    MICRO,
    PAGES,
    PER_SECOND,
    RATIO,
    SECONDS,
    ChipStats,
    Finding,
    JobStats,
    Observations,
    Report,
)
from exporter.generate.chip_rules import isolated_pages_limit
from exporter.generate.thresholds import (
    ABNORMAL,
    HEALTHY,
    WARNING,
    AlertSpec,
    Indicator,
    Thresholds,
    duration_seconds,
)
from exporter.jobs.phases import STAGES, stage_of
from exporter.profiles.indicators import ProfileSummary

UTILIZATION = "device_utilization"
MEMCPY_PHASES = ("h2d", "d2h")
# Level of each profile indicator (profile_indicators.ROWS fields).
_PROFILE_LEVELS = {
    "step_duration_seconds": MESO,
    "compute_ratio": MESO,
    "communication_ratio": MESO,
    "idle_ratio": MACRO,
    "memcpy_ratio": MESO,
    "framework_overhead_ratio": MESO,
    "top3_operator_ratio": MICRO,
    "max_operator_ratio": MICRO,
    "communication_wait_ratio": MESO,
}


def analyse(obs: Observations, table: Thresholds) -> Report:
    sound = hardware.by_subject([*hardware.hardware_findings(obs.hardware, table), *hardware_findings(obs.chips, table)])
    findings = [
        *sound,
        *chip_findings(obs.chips, table, hardware.faulty_chips(sound)),
        *job_findings(obs.jobs, table),
        *job_ranks.straggler_findings(obs.jobs, table),
        *profile_findings(obs.profiles, table, job_ranks.cpu_ranks(obs.jobs)),
    ]
    return Report(obs.source, obs.window, tuple(findings), (*obs.notes, *mfu_notes(obs.jobs)))


# --- bounds text ------------------------------------------------------------------------------


def bounds_text(indicator: Indicator) -> str:
    parts = []
    if indicator.healthy_text():
        parts.append(f"healthy {indicator.healthy_text()}")
    if indicator.abnormal_text():
        parts.append(f"abnormal {indicator.abnormal_text()}")
    return ", ".join(parts)


def _judge(table: Thresholds, indicator_id: str, value: float) -> tuple[str | None, str, str | None]:
    """(verdict, bounds text, alert) of ``value``; no verdict when the table lacks the row."""
    if indicator_id not in table:
        return None, "", None
    indicator = table[indicator_id]
    return indicator.verdict(value), bounds_text(indicator), indicator.alert


def _alert(table: Thresholds, name: str) -> AlertSpec | None:
    try:
        return table.alert(name)
    except KeyError:
        return None


# --- hardware: chips --------------------------------------------------------------------------

PAGES_ALERT = "NPUMemoryPagesIsolated"


def hardware_findings(chips: Iterable[ChipStats], table: Thresholds) -> list[Finding]:
    return [isolated_pages_finding(chip, table) for chip in chips if chip.isolated_pages]


def isolated_pages_finding(chip: ChipStats, table: Thresholds) -> Finding:
    """NPUMemoryPagesIsolated's tiers: abnormal where it is critical (a page after a double-bit
    error, or more pages than its limit), warning where new pages appeared in the window."""
    total = sum(p.pages for p in chip.isolated_pages)
    double = sum(p.pages for p in chip.isolated_pages if p.type == "double_bit")
    spec = _alert(table, PAGES_ALERT)
    verdict, bounds = None, ""
    if spec is not None:
        limit, new_above = isolated_pages_limit(spec), spec.threshold or 0.0
        verdict = isolated_pages_verdict(total, double, chip.new_isolated_pages, limit, new_above)
        bounds = f"abnormal: any double-bit or > {limit:g}; warning: > {new_above:g} new"
    detail = ", ".join(f"{p.memory} {p.type} {p.pages:g}" for p in chip.isolated_pages if p.pages)
    if chip.new_isolated_pages:
        detail += f"; {chip.new_isolated_pages:g} new in the window"
    return Finding(
        HARDWARE,
        "isolated_pages",
        "ECC isolated memory pages",
        chip.subject,
        total,
        PAGES,
        verdict,
        None,
        PAGES_ALERT if spec else None,
        bounds,
        detail,
    )


def isolated_pages_verdict(total: float, double: float, new: float | None, limit: float, new_above: float) -> str:
    if double > 0 or total > limit:
        return ABNORMAL
    if new is not None and new > new_above:
        return WARNING
    return HEALTHY


# --- macro: chips -----------------------------------------------------------------------------


def chip_findings(chips: Iterable[ChipStats], table: Thresholds, faulty: Mapping[str, str] | None = None) -> list[Finding]:
    """Utilization and swing of each chip; a chip with a hardware fault (``faulty``: subject ->
    the fault) is not judged on them: its low use follows from the fault, no pipeline lever helps."""
    out: list[Finding] = []
    for chip in chips:
        fault = (faulty or {}).get(chip.subject)
        if fault is not None:
            out.append(consequence_finding(chip, fault))
            continue
        out.append(utilization_finding(chip, table))
        stability = stability_finding(chip, table)
        if stability is not None:
            out.append(stability)
    return out


def utilization_finding(chip: ChipStats, table: Thresholds) -> Finding:
    verdict, bounds, alert = _judge(table, UTILIZATION, chip.mean)
    detail = _spread(chip)
    if not chip.in_use:
        verdict, bounds = None, ""
        detail = "not in use (no process, pod or job): idle capacity, not judged" + (f"; {detail}" if detail else "")
    return Finding(MACRO, "utilization", "Device utilization", chip.subject, chip.mean, RATIO, verdict, UTILIZATION, alert, bounds, detail)


def consequence_finding(chip: ChipStats, fault: str) -> Finding:
    return Finding(
        MACRO,
        "utilization",
        "Device utilization",
        chip.subject,
        chip.mean,
        RATIO,
        None,
        None,
        None,
        "",
        f"not judged: a consequence of the hardware fault ({fault}), see Hardware",
    )


def _spread(chip: ChipStats) -> str:
    if chip.samples < 2 or chip.minimum is None or chip.maximum is None:
        return ""
    return f"min {_pct(chip.minimum)}, max {_pct(chip.maximum)} over {chip.samples} samples"


def stability_finding(chip: ChipStats, table: Thresholds) -> Finding | None:
    """Saw-tooth: the NPUUtilizationUnstable rule (stddev above its threshold around a mean
    below ``mean_below``). A wide swing around a high mean is only a warning."""
    spec = _alert(table, "NPUUtilizationUnstable")
    if chip.stddev is None or not chip.in_use or spec is None or spec.threshold is None:
        return None
    default_mean = table[UTILIZATION].healthy if UTILIZATION in table else 0.85
    mean_below = float(spec.param("mean_below", default_mean) or 0.85)
    verdict = unstable_verdict(chip.stddev, chip.mean, spec.threshold, mean_below)
    bounds = f"abnormal: stddev > {_pct(spec.threshold)} around a mean < {_pct(mean_below)}"
    return Finding(
        MACRO,
        "stability",
        "Utilization swing (stddev)",
        chip.subject,
        chip.stddev,
        RATIO,
        verdict,
        UTILIZATION if UTILIZATION in table else None,
        spec.alert,
        bounds,
    )


def unstable_verdict(stddev: float, mean: float, threshold: float, mean_below: float) -> str:
    if stddev > threshold:
        return ABNORMAL if mean < mean_below else WARNING
    return HEALTHY


# --- macro + meso: training jobs (hooks) --------------------------------------------------------


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
                else unjudged(f, f"too young to judge: {_duration(job.lifetime or 0)} of iterations, under {_duration(minimum)}")
                for f in found
            ]
        out += ([age_finding(job, minimum)] if job.lifetime is not None else []) + found
    return out


def min_job_age(table: Thresholds) -> float:
    """A job is judged once it has run as long as the alerts on its steps look back
    (NPUIdleGapsHigh's range, 5m): younger, its shares and gaps are noise of its start."""
    spec = _alert(table, "NPUIdleGapsHigh")
    return duration_seconds(spec.range) if spec is not None and spec.range else 300.0


def age_finding(job: JobStats, minimum: float) -> Finding:
    lifetime = job.lifetime or 0.0
    whole = job.window is not None and lifetime >= 0.95 * job.window
    detail = (
        "iterating over the whole window"
        if whole
        else f"judged over its own {_duration(lifetime)} of iterations in the window, not the whole window"
    )
    if lifetime < minimum:
        detail = f"too young to judge (under {_duration(minimum)}): its numbers are shown, not judged"
    return Finding(MACRO, "job_age", "Iterating for (in the window)", job.subject, lifetime, SECONDS, detail=detail)


def unjudged(finding: Finding, why: str) -> Finding:
    return replace(finding, verdict=None, bounds="", detail=why)


def job_macro(job: JobStats, table: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    if job.busy_ratio is not None and (job.iterations_per_second or 0) > 0:
        idle = min(1.0, max(0.0, 1.0 - job.busy_ratio))
        verdict, bounds, alert = _judge(table, "idle_share", idle)
        out.append(
            Finding(
                MACRO,
                "idle_gaps",
                "Idle time between iterations",
                job.subject,
                idle,
                RATIO,
                verdict,
                "idle_share",
                alert,
                bounds,
                "share of wall time outside the reported iterations",
            )
        )
    mfu = mfu_finding(job, table)
    if mfu is not None:
        out.append(mfu)
    stall = _alert(table, "NPUTrainingStalled")
    if job.seconds_since_last_iteration is not None:
        age = max(0.0, job.seconds_since_last_iteration)
        verdict, bounds = None, ""
        if stall is not None and stall.threshold is not None:
            verdict = ABNORMAL if age > stall.threshold else HEALTHY
            bounds = f"abnormal > {_duration(stall.threshold)} (NPUTrainingStalled)"
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
    verdict, bounds, _ = _judge(table, MFU, job.mfu)
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
        verdict, bounds, alert = _judge(table, "memcpy_share", sum(copies))
        out.append(
            Finding(
                MESO,
                "memcpy_share",
                "Memory copy share (h2d + d2h)",
                job.subject,
                sum(copies),
                RATIO,
                verdict,
                "memcpy_share",
                alert,
                bounds,
            )
        )
    if "framework" in shares:
        verdict, bounds, alert = _judge(table, "framework_overhead_share", shares["framework"])
        out.append(
            Finding(
                MESO,
                "framework_share",
                "Framework overhead share",
                job.subject,
                shares["framework"],
                RATIO,
                verdict,
                "framework_overhead_share",
                alert,
                bounds,
            )
        )
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


# --- profiles (torch_npu / msprof exports, or their npu_profile_* metrics) -----------------------


def profile_subject(summary: ProfileSummary) -> str:
    """`profile of job J rank R` plus where: the export's directory name, or the Prometheus target."""
    rank = "?" if summary.rank is None else str(summary.rank)
    where = summary.path.rstrip("/").rsplit("/", 1)[-1] if summary.path else ""
    return f"profile of job {summary.job_name} rank {rank}" + (f" ({where})" if where else "")


def profile_findings(profiles: Iterable[ProfileSummary], table: Thresholds, cpu: Collection[tuple[str, str]] = ()) -> list[Finding]:
    """``cpu``: (job_name, rank) of ranks on no chip: their numbers are shown, not judged by the
    NPU health table, and get none of its (NPU) advice."""
    out: list[Finding] = []
    for summary in profiles:
        subject = profile_subject(summary)
        if (summary.job_name, str(summary.rank if summary.rank is not None else "")) in cpu:
            found = _profile_rows(summary, subject, table) + operator_findings(summary, subject)
            why = "a CPU job (no chip): the NPU health table and its advice do not apply"
            out += [replace(f, verdict=None, indicator=None, alert=None, bounds="", detail=why) for f in found]
            continue
        out += _profile_rows(summary, subject, table) + operator_findings(summary, subject)
    return out


def _profile_rows(summary: ProfileSummary, subject: str, table: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for row in profile_indicators.ROWS:
        value = getattr(summary, row.field)
        if value is None:
            continue
        indicator = profile_indicators.indicator_for(row, table)
        unit = SECONDS if row.field.endswith("_seconds") else RATIO
        level = _PROFILE_LEVELS.get(row.field, MESO)
        if indicator is None:
            out.append(Finding(level, f"profile.{row.field}", f"profile: {row.title}", subject, value, unit))
            continue
        out.append(
            Finding(
                level,
                f"profile.{row.field}",
                f"profile: {row.title}",
                subject,
                value,
                unit,
                indicator.verdict(value),
                indicator.id,
                indicator.alert,
                bounds_text(indicator),
            )
        )
    return out


def operator_findings(summary: ProfileSummary, subject: str) -> list[Finding]:
    return [
        Finding(
            MICRO,
            "operator",
            f"operator #{position} {op.op_type}",
            subject,
            op.ratio,
            RATIO,
            detail=f"{op.time_us:.1f} us x{op.count}" if op.count else "",
        )
        for position, op in enumerate(summary.top_operators, start=1)
    ]


# --- number formatting (shared by the renderers) -------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%".replace(".0%", "%")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g}h"
    if seconds >= 60:
        return f"{seconds / 60:.3g}m"
    return f"{seconds:.3g}s"
