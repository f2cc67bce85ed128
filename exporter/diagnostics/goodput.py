"""The capacity report's goodput, as pure functions: per training job, per namespace and in all,
the NPU-hours over the window (rank-hours: one rank holds one NPU) split into goodput and each
badput kind (npu_job_goodput_seconds_total, npu_job_badput_seconds_total{kind};
docs/training-hooks.md, "Goodput and badput"), with their shares and the restarts seen.

The npu_job_* series carry no namespace: a rank's seconds of each step count for the namespace
of the pod on its chip in that step (npu_job_info's device, npu_pod_info's namespace, as the
energy per namespace is attributed). A rank on chips of several namespaces in one step splits
its seconds evenly between them; a rank with no pod on its chip (a job outside Kubernetes, or no
pods source) counts for NO_NAMESPACE."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.diagnostics.capacity_text import hours_text, pct_text
from exporter.jobs.goodput import KINDS

GOODPUT = "goodput"
PARTS = (GOODPUT, *KINDS)  # the columns: goodput, then the badput kinds in the dashboard's order
NO_NAMESPACE = "(no pod)"

RankKey = tuple[str, str, str]  # instance, job_name, rank
Steps = Mapping[float, float]  # step end -> seconds in that step


@dataclass(frozen=True)
class GoodputInput:
    """Per rank, each part's seconds per step (``parts[rank][part]``), the restarts in the window,
    the devices npu_job_info named per step, and per (instance, device) the namespaces of its
    pods per step."""

    parts: Mapping[RankKey, Mapping[str, Steps]]
    disruptions: Mapping[RankKey, float]
    devices: Mapping[RankKey, Mapping[float, frozenset[str]]]
    pods: Mapping[tuple[str, str], Mapping[float, frozenset[str]]]


@dataclass(frozen=True)
class GoodputRow:
    name: str
    hours: tuple[tuple[str, float], ...]  # (part, NPU-hours) for every PARTS
    disruptions: float = 0.0
    ranks: int = 0

    @property
    def total(self) -> float:
        return sum(h for _, h in self.hours)

    def get(self, part: str) -> float:
        return dict(self.hours).get(part, 0.0)

    def share(self, part: str) -> float | None:
        total = self.total
        return self.get(part) / total if total > 0 else None

    @property
    def largest_badput(self) -> tuple[str, float] | None:
        """The badput kind with the most hours, and its hours (None: no badput)."""
        kind, hours = max(((k, h) for k, h in self.hours if k != GOODPUT), key=lambda kh: kh[1], default=("", 0.0))
        return (kind, hours) if hours > 0 else None


@dataclass(frozen=True)
class GoodputReport:
    total: GoodputRow
    jobs: tuple[GoodputRow, ...]
    namespaces: tuple[GoodputRow, ...]

    @property
    def parts(self) -> tuple[str, ...]:
        """Goodput and the badput kinds some job had: the columns worth showing."""
        return tuple(p for p in PARTS if p == GOODPUT or self.total.get(p) > 0)


class _Sum:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.disruptions = 0.0
        self.ranks: set[RankKey] = set()

    def add(self, part: str, seconds: float, rank: RankKey) -> None:
        self.seconds[part] += seconds
        self.ranks.add(rank)

    def row(self, name: str) -> GoodputRow:
        return GoodputRow(name, tuple((p, self.seconds[p] / 3600.0) for p in PARTS), self.disruptions, len(self.ranks))


def analyse_goodput(data: GoodputInput) -> GoodputReport | None:
    """The window's NPU-hours by part; None when no rank served the counters (exporters before
    them, or no training job)."""
    if not data.parts:
        return None
    total, jobs, spaces = _Sum(), dict[str, _Sum](), dict[str, _Sum]()
    for rank, parts in data.parts.items():
        job = jobs.setdefault(rank[1], _Sum())
        for part, steps in parts.items():
            if part not in total.seconds:
                continue  # a kind this report does not know (a newer exporter): not guessed at
            for t, seconds in steps.items():
                total.add(part, seconds, rank)
                job.add(part, seconds, rank)
                names = _namespaces(data, rank, t)
                for name in names:
                    spaces.setdefault(name, _Sum()).add(part, seconds / len(names), rank)
        restarts = data.disruptions.get(rank, 0.0)
        total.disruptions += restarts
        job.disruptions += restarts
        held = _namespaces(data, rank, None)
        for name in held:
            spaces.setdefault(name, _Sum()).disruptions += restarts / len(held)
    return GoodputReport(total.row("all jobs"), _rows(jobs), _rows(spaces))


def _rows(sums: Mapping[str, _Sum]) -> tuple[GoodputRow, ...]:
    rows = (s.row(name) for name, s in sums.items())
    return tuple(sorted((r for r in rows if r.total > 0), key=lambda r: (-r.total, r.name)))


def _namespaces(data: GoodputInput, rank: RankKey, t: float | None) -> tuple[str, ...]:
    """The namespaces of the pods on the rank's chips at step ``t`` (None: in any step); the
    window's when that step has none."""
    by_step = data.devices.get(rank, {})

    def at(step: float | None) -> set[str]:
        devices = by_step.get(step, frozenset()) if step is not None else frozenset().union(*by_step.values())
        out: set[str] = set()
        for device in devices:
            pods = data.pods.get((rank[0], device), {})
            out |= pods.get(step, frozenset()) if step is not None else frozenset().union(*pods.values())
        return out

    names = at(t) or (at(None) if t is not None else set())
    return tuple(sorted(names)) or (NO_NAMESPACE,)


def goodput_findings(r: GoodputReport | None) -> list[str]:
    """The summary's lines: the NPU-hours in goodput, the largest badput kind, the jobs that lost most."""
    if r is None or r.total.total <= 0:
        return []
    t = r.total
    out = [
        f"Goodput: {hours_text(t.get(GOODPUT))} of {hours_text(t.total)} NPU-hours of training jobs "
        f"({pct_text(t.share(GOODPUT))}) moved training forward{_largest(t)}"
        + (f"; {t.disruptions:.0f} restart(s)." if t.disruptions >= 0.5 else ".")
    ]
    lost = sorted(r.jobs, key=lambda j: (-(j.total - j.get(GOODPUT)), j.name))[:3]
    if len(r.jobs) > 1 and lost:
        out.append("Most NPU-hours lost per training job: " + ", ".join(_lost(j) for j in lost) + ".")
    return out


def _largest(row: GoodputRow) -> str:
    largest = row.largest_badput
    if largest is None:
        return ""
    kind, hours = largest
    return f"; the largest badput: {kind} ({hours_text(hours)} NPU-hours, {pct_text(row.share(kind))})"


def _lost(row: GoodputRow) -> str:
    largest = row.largest_badput
    most = f", mostly {largest[0]}" if largest else ""
    return f"{row.name} ({hours_text(row.total - row.get(GOODPUT))} NPU-hours{most})"


def goodput_json(r: GoodputReport | None) -> dict[str, object] | None:
    if r is None:
        return None

    def row(g: GoodputRow) -> dict[str, object]:
        return {
            "name": g.name,
            "ranks": g.ranks,
            "npu_hours": g.total,
            "goodput_hours": g.get(GOODPUT),
            "goodput_share": g.share(GOODPUT),
            "badput_hours": {k: g.get(k) for k in KINDS},
            "badput_shares": {k: g.share(k) for k in KINDS},
            "largest_badput": g.largest_badput[0] if g.largest_badput else None,
            "disruptions": g.disruptions,
        }

    return {**row(r.total), "jobs": [row(j) for j in r.jobs], "namespaces": [row(n) for n in r.namespaces]}


def goodput_cells(row: GoodputRow, parts: Iterable[str]) -> list[str]:
    """A table row's figures: NPU-hours, then each part's hours with its share."""
    return [hours_text(row.total), *(f"{hours_text(row.get(p))} ({pct_text(row.share(p))})" for p in parts), f"{row.disruptions:.0f}"]
