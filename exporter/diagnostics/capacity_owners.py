"""The capacity report per owner: who held the chips (npu_chip_owner_info, on any runtime:
a Kubernetes pod, a Docker, containerd or Podman container, a Slurm job, a systemd unit, a host
process), its chip-hours and how many of them were allocated but idle.

A chip-step counts for every owner whose series had the chip in that step (a chip shared by two
containers counts for both, as a chip counts for every namespace a pod of which held it); a
chip-step with no owner series counts for no owner: the owner table covers what the owner
source saw, the node tables every chip. *Allocated but idle*: the owner held the chip, its health
did not page, and its AI Cores averaged below 1% over the step (IDLE_UTILIZATION below, the
bound the report calls a chip in use by when no in-use series exist). Owners are many where
Slurm jobs come and go: Python runs a line or two per owner, never per chip-step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

from exporter.diagnostics.capacity_text import hours_text, pct_text
from exporter.thresholds.table import Thresholds

IDLE_UTILIZATION = 0.01  # below it a chip-step's AI Cores are idle: allocated but idle; in use when no in-use series exist
OWNERS_IN_SUMMARY = 5  # owners named in the summary (most chip-hours, most allocated-but-idle); the table names them all


@dataclass(frozen=True)
class OwnerSummary:
    """One owner's chip-hours over the window, as npu_chip_owner_info names it (runtime, owner)."""

    runtime: str
    owner: str
    chips: int  # most chips held at once
    chip_hours: float
    idle_chip_hours: float  # allocated but idle
    unused_chip_hours: float  # weighted by the share the AI Cores were not busy
    mean_utilization: float  # over the chip-steps it held
    below_share: float  # of those, the share below the low-utilization bound
    verdict: str | None = None

    @property
    def name(self) -> str:
        """As the tables name it: runtime · owner."""
        return f"{self.runtime} · {self.owner}"

    @property
    def idle_share(self) -> float | None:
        return self.idle_chip_hours / self.chip_hours if self.chip_hours else None


def owner_summaries(names: Sequence[tuple[str, ...]], figures: Sequence[Sequence[float]], table: Thresholds) -> tuple[OwnerSummary, ...]:
    """``names`` (runtime, owner) and, per figure, one value per owner: most chips, chip-hours,
    allocated-but-idle and unused chip-hours, mean utilization, share below the low bound (as
    capacity_grid.owner_figures gives them, most chip-hours first)."""
    row = table["device_utilization"] if "device_utilization" in table else None
    verdict: Callable[[float], str | None] = row.verdict if row is not None else lambda value: None
    rows = zip(names, *figures, strict=True)
    return tuple(
        OwnerSummary(runtime, owner, int(chips), hours, idle, unused, mean, below, verdict(mean))
        for (runtime, owner), chips, hours, idle, unused, mean, below in rows
    )


def owner_findings(owners: Sequence[OwnerSummary]) -> list[str]:
    """The owners with the most chip-hours, and those with the most allocated-but-idle ones."""
    if not owners:
        return []

    def more(count: int) -> str:
        rest = count - OWNERS_IN_SUMMARY
        return f", and {rest} more (all in the table below)" if rest > 0 else ""

    named = ", ".join(f"{o.name} ({hours_text(o.chip_hours)})" for o in owners[:OWNERS_IN_SUMMARY])
    out = [f"Chip-hours per owner: {named}{more(len(owners))}."]
    # most first; a stable sort: ties keep the owners' order (most chip-hours first)
    idle = sorted(filter(attrgetter("idle_chip_hours"), owners), key=attrgetter("idle_chip_hours"), reverse=True)
    if idle:
        named = ", ".join(
            f"{o.name} ({hours_text(o.idle_chip_hours)} of {hours_text(o.chip_hours)}, {pct_text(o.idle_share)})"
            for o in idle[:OWNERS_IN_SUMMARY]
        )
        out.append(f"Allocated but idle (held, AI Cores below {IDLE_UTILIZATION * 100:g}%), chip-hours: {named}{more(len(idle))}.")
    return out
