"""`diagnose`'s checks of profiles (torch_npu, MindSpore and msprof exports, or their
npu_profile_* metrics): each indicator of profile_indicators.py judged by its row of the
threshold table at its level, and the top operators (micro level). Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace

from exporter.diagnostics import profile_indicators
from exporter.diagnostics.model import MACRO, MESO, MICRO, RATIO, SECONDS, Finding
from exporter.diagnostics.verdicts import bounds_text
from exporter.profiles.indicators import ProfileSummary
from exporter.thresholds.table import Thresholds

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
        found = _profile_rows(summary, subject, table) + operator_findings(summary, subject)
        if (summary.job_name, str(summary.rank if summary.rank is not None else "")) in cpu:
            why = "a CPU job (no chip): the NPU health table and its advice do not apply"
            found = [replace(f, verdict=None, indicator=None, alert=None, bounds="", detail=why) for f in found]
        out += found
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
