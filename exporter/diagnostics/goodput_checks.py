"""`diagnose`'s goodput checks of each training rank (docs/training-hooks.md, "Goodput and
badput"): the share of its wall time in steps that moved training forward, judged by the
table's goodput row (NPUJobGoodputLow's), and its largest kind of badput, judged by the
badput_share row, with that kind's lever from the same row. Pure: shares in, findings out; the
readers give the shares (`shares`) over the window, or since the exporter has held the rank."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from exporter.diagnostics.model import MACRO, Finding, JobStats
from exporter.diagnostics.verdicts import judged
from exporter.jobs.goodput import KINDS
from exporter.thresholds.table import HEALTHY, Thresholds

GOODPUT, BADPUT_SHARE = "goodput", "badput_share"

WHAT = {
    "startup": "a process's start to its first step (imports, device set-up, compilation, model loading)",
    "data_wait": "the data phases of the steps",
    "checkpoint_save": "saving checkpoints",
    "checkpoint_restore": "restoring checkpoints",
    "lost_progress": "steps re-done after a restart",
    "downtime": "no process between a crash and its restart",
    "idle": "gaps between steps no phase explains",
    "other": "phases between steps that are neither data nor checkpoints (evaluation, logging)",
}


def shares(goodput: float | None, badput: Mapping[str, float]) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """(goodput share, (kind, share) in KINDS order) of the seconds (or rates) accounted;
    (None, ()) when none were."""
    whole = (goodput or 0.0) + sum(v for v in badput.values() if v > 0)
    if whole <= 0:
        return None, ()
    return (goodput or 0.0) / whole, tuple((k, max(0.0, badput.get(k, 0.0)) / whole) for k in KINDS if k in badput)


def lever(kind: str, table: Thresholds) -> str:
    """The badput_share row's lever for ``kind`` (its text after "kind:"); "" when it has none."""
    if BADPUT_SHARE not in table:
        return ""
    for text in table[BADPUT_SHARE].levers:
        named, _, what = text.partition(":")
        if what and kind in named.replace(",", " ").split():
            return what.strip()
    return ""


def goodput_findings(job: JobStats, table: Thresholds) -> list[Finding]:
    if job.goodput is None:
        return []
    out = [
        judged(
            MACRO,
            "goodput",
            "Goodput (wall time in steps that moved training forward)",
            job.subject,
            job.goodput,
            GOODPUT,
            table,
            "the rest is badput: start-ups, data waits, checkpoints, re-done steps, downtime, idle gaps",
        )
    ]
    kind, share = max(job.badput, key=lambda ks: ks[1], default=("", 0.0))
    if share > 0:
        finding = judged(MACRO, "badput", f"Largest badput: {kind}", job.subject, share, BADPUT_SHARE, table, WHAT.get(kind, kind))
        how = lever(kind, table)
        if how and finding.verdict not in (HEALTHY, None):
            finding = replace(finding, detail=f"{finding.detail}; lever: {how}")
        out.append(finding)
    return out
