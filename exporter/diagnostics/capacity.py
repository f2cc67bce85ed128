"""Capacity planning from history, as pure functions: per-chip series in, the numbers of the
report out (utilization per node and namespace, distribution, idle chip-hours, share of time
below the low-utilization bound, HBM headroom, allocation vs use, linear forecasts, and the
written findings).

Terms, as in the generated recording rules: a chip is *in use* (allocated) while a process, a
pod or a training job is on it; *idle* chip-hours are hours with nothing on the chip; *unused*
chip-hours weight every hour by the share its AI Cores were not busy. Chip-hours are observed
time only: each point weighs the seconds of its step the chip was observed
(``ChipHistory.observed``, from sample timestamps), not the whole step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from exporter.core.values import format_duration
from exporter.diagnostics.capacity_owners import OwnerSummary, owner_findings, owner_summaries
from exporter.diagnostics.capacity_text import count_text, forecast_text, hours_text, pct_text
from exporter.diagnostics.forecast import (
    DAY,
    MIN_FORECAST_DAYS,
    Forecast,
    Point,
    daily,
    forecast,
)
from exporter.thresholds.table import ABNORMAL, HEALTHY, Thresholds

if TYPE_CHECKING:
    from exporter.diagnostics.capacity_grid import Grid, Hbm, Ints, NamespaceFigures

NICE_STEPS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MAX_POINTS = 720


def choose_step(seconds: float) -> float:
    """The smallest nice step giving at most MAX_POINTS points (30d -> 1h, 7d -> 15m, 1d -> 2m)."""
    for step in NICE_STEPS:
        if seconds / step <= MAX_POINTS:
            return float(step)
    return float(math.ceil(seconds / MAX_POINTS / DAY) * DAY)


# --- input -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChipHistory:
    instance: str
    npu: str
    chip: str
    device: str
    util: tuple[Point, ...]  # (step end, mean AI Core busy share over the step)
    in_use: frozenset[float] = frozenset()  # step ends with a process, pod or job on the chip
    namespace: tuple[tuple[float, str], ...] = ()  # (step end, namespace the chip was allocated to)
    observed: tuple[Point, ...] = ()  # (step end, seconds observed); none given: whole steps
    unhealthy: frozenset[float] = frozenset()  # step ends where the chip's health paged (NPUUnhealthy's states)
    owners: tuple[tuple[float, str, str], ...] = ()  # (step end, runtime, owner) of each owner holding the chip


@dataclass(frozen=True)
class NodeHbm:
    instance: str
    used: tuple[Point, ...]  # bytes, summed over the node's chips
    total: tuple[Point, ...]


@dataclass(frozen=True)
class CapacityInput:
    source: str
    start: float
    end: float
    step: float
    chips: tuple[ChipHistory, ...]
    hbm: tuple[NodeHbm, ...] = ()
    in_use_known: bool = True  # some process/pod/job series existed; else idle = below 1%
    namespaces_known: bool = False  # npu_pod_info existed
    notes: tuple[str, ...] = ()
    requested: float | None = None  # seconds asked for, when the data covers less (the window is what exists)
    inventory: Mapping[str, NodeInventory] = field(default_factory=dict)  # node -> its chips at the window's end
    owners_known: bool = False  # npu_chip_owner_info (or its hourly record) existed


@dataclass(frozen=True)
class NodeInventory:
    """A node's chips at the window's end: installed (npu_expected_devices, else None), listed
    by npu-smi, unhealthy (health pages) and unread (npu_up 0)."""

    expected: int | None = None
    seen: int | None = None
    unhealthy: int = 0
    unread: int = 0


@dataclass(frozen=True)
class Bounds:
    low: float = 0.60  # NPULowUtilization / device_utilization abnormal bound
    healthy: float = 0.85  # device_utilization healthy bound
    hbm_full: float = 0.95  # NPUHBMAlmostFull threshold

    @staticmethod
    def from_table(table: Thresholds) -> Bounds:
        low, healthy, hbm = 0.60, 0.85, 0.95
        if "device_utilization" in table:
            row = table["device_utilization"]
            low = row.abnormal if row.abnormal is not None else low
            healthy = row.healthy if row.healthy is not None else healthy
        spec = table.find("NPUHBMAlmostFull")
        hbm = spec.threshold if spec is not None and spec.threshold is not None else hbm
        return Bounds(low, healthy, hbm)


# --- output ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSummary:
    instance: str
    chips: int
    mean_utilization: float | None  # chips in use
    below_share: float | None  # in-use chip time below the low bound
    allocation: float  # share of chip time in use
    chip_hours: float
    idle_chip_hours: float
    unused_chip_hours: float
    hbm_peak_ratio: float | None = None
    hbm_min_headroom_bytes: float | None = None
    verdict: str | None = None
    inventory: NodeInventory = field(default_factory=NodeInventory)


@dataclass(frozen=True)
class ChipSummary:
    instance: str
    npu: str
    chip: str
    device: str
    mean_utilization: float  # over the steps it was in use
    below_share: float  # of those steps, the share below the low bound
    in_use_hours: float

    @property
    def subject(self) -> str:
        """As the alerts name a chip: device D (NPU N, chip C) on INSTANCE."""
        return f"device {self.device or '?'} (NPU {self.npu}, chip {self.chip}) on {self.instance}"


@dataclass(frozen=True)
class NamespaceSummary:
    namespace: str
    chips: int  # most chips allocated at once
    chip_hours: float
    mean_utilization: float | None
    below_share: float | None
    verdict: str | None = None


@dataclass(frozen=True)
class CapacityReport:
    source: str
    start: float
    end: float
    step: float
    bounds: Bounds
    nodes: tuple[NodeSummary, ...]
    namespaces: tuple[NamespaceSummary, ...]
    node_utilization: Mapping[str, tuple[Point, ...]]
    namespace_utilization: Mapping[str, tuple[Point, ...]]
    cluster_utilization: tuple[Point, ...]
    allocation: tuple[tuple[float, float, float, float], ...]  # (t, chips, in use, busy chip-equivalents)
    hbm_headroom: Mapping[str, tuple[Point, ...]]  # bytes free per node
    distribution: tuple[float, ...]  # in-use chip-step utilizations
    totals: Mapping[str, float | None]
    forecasts: tuple[Forecast, ...]
    findings: tuple[str, ...]
    verdict: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    chips_below: tuple[ChipSummary, ...] = ()  # in-use chips averaging below the low bound, lowest first
    empty: Mapping[str, str] = field(default_factory=dict)  # section -> why it has nothing to show
    requested: float | None = None  # seconds asked for, when the data covers less
    owners: tuple[OwnerSummary, ...] = ()  # most chip-hours first

    @property
    def covered(self) -> float:
        """Seconds of the window (its first step's start to its end)."""
        return self.end - self.start + self.step


# --- computation -------------------------------------------------------------------------------------


def analyse_capacity(data: CapacityInput, table: Thresholds, horizon_days: float = 30.0) -> CapacityReport:
    # numpy comes with the report's extra: imported here, so the exporter itself never loads it
    from exporter.diagnostics import capacity_grid as cg

    bounds = Bounds.from_table(table)
    grid = cg.build(data.chips, data.step, data.in_use_known)
    rows = cg.by_instance([c.instance for c in data.chips])
    hbm = {n.instance: cg.Hbm.of(n.used, n.total) for n in data.hbm}
    nodes = _nodes(data, grid, rows, hbm, bounds, table)
    every = cg.figures(grid, slice(None))
    chip_hours, idle = every.chip_hours, every.idle_hours
    mean_in_use = cg.mean(every.used)
    totals: dict[str, float | None] = {
        "chips": float(len(data.chips)),
        "nodes": float(len(rows)),
        "chip_hours": chip_hours,
        "idle_chip_hours": idle,
        "unused_chip_hours": every.unused_hours,
        "idle_share": idle / chip_hours if chip_hours else None,
        "allocation": 1.0 - idle / chip_hours if chip_hours else None,
        "mean_utilization_in_use": mean_in_use,
        "mean_utilization_all": cg.mean(every.all_util),
        "below_share": cg.share_below(every.used, bounds.low),
    }
    allocation = cg.allocation(grid)
    spaces = cg.namespace_figures(grid)
    forecasts = _forecasts(data, allocation, hbm, bounds, horizon_days)
    verdict = _verdict(table, mean_in_use)
    report = CapacityReport(
        data.source,
        data.start,
        data.end,
        data.step,
        bounds,
        nodes,
        _namespaces(spaces, bounds, table),
        {name: cg.group_means(grid, r) for name, r in rows.items()},
        {s.namespace: s.series for s in spaces},
        cg.group_means(grid, slice(None)) if data.chips else (),
        allocation,
        {name: h.headroom() for name, h in hbm.items()},
        tuple(every.used.tolist()),
        totals,
        forecasts,
        (),
        verdict or HEALTHY,
        data.notes,
        _chips_below(data, grid, bounds),
        {},
        data.requested,
        _owners(grid, bounds, table),
    )
    report = replace(report, empty=empty_sections(report, data))
    return replace(report, findings=tuple(findings(report)))


def _chips_below(data: CapacityInput, grid: Grid, bounds: Bounds) -> tuple[ChipSummary, ...]:
    """Every chip whose utilization, over the steps it was in use, averaged below the low bound."""
    from exporter.diagnostics.capacity_grid import chip_means

    out = [
        ChipSummary(c.instance, c.npu, c.chip, c.device, mean, below, hours)
        for row, mean, below, hours in chip_means(grid, bounds.low)
        if mean < bounds.low
        for c in (data.chips[row],)
    ]
    return tuple(sorted(out, key=lambda c: (c.mean_utilization, c.instance, c.device)))


def empty_sections(r: CapacityReport, data: CapacityInput) -> dict[str, str]:
    """Why a section of the report has no chart: {section: reason}."""
    out = {}
    if not r.distribution:
        out["distribution"] = out["below_threshold"] = (
            "No chip was in use in the window (no process, pod or training job on any chip), so there is no "
            "utilization of chips in use to show."
        )
    if not r.namespace_utilization:
        out["utilization_namespaces"] = (
            "No chip was allocated to a namespace: Prometheus has no npu_pod_info series for these chips (the "
            "exporter reads them from the kubelet pod-resources API, on Kubernetes only)."
            if not data.namespaces_known
            else "No chip was allocated to a namespace at the steps with utilization data."
        )
    if not r.owners:
        out["owners"] = (
            "No chip had a known owner: Prometheus has no npu_chip_owner_info series for these chips (the exporter's "
            "owner source, collector.owners, reads who holds each chip from its processes' cgroups, on any runtime)."
            if not data.owners_known
            else "No owner held a chip at the steps with utilization data."
        )
    if not r.hbm_headroom:
        out["hbm_headroom"] = (
            "Prometheus has no npu_hbm_used_bytes / npu_hbm_total_bytes series for these nodes (chips or drivers that do not report HBM)."
        )
    if not r.forecasts:
        days = len({int((t - data.start) // DAY) for t, *_ in r.allocation})
        out["forecast"] = (
            f"Forecasts fit a line through daily values and need at least {MIN_FORECAST_DAYS} days "
            f"with data; this window has {format_duration(r.covered)} of data. Report on a longer "
            "range once more history exists."
            if days < MIN_FORECAST_DAYS
            else "No quantity with a trend to forecast."
        )
    return out


def _verdict(table: Thresholds, value: float | None) -> str | None:
    if value is None or "device_utilization" not in table:
        return None
    return table["device_utilization"].verdict(value)


def _nodes(
    data: CapacityInput, grid: Grid, rows: Mapping[str, Ints], hbm: Mapping[str, Hbm], bounds: Bounds, table: Thresholds
) -> tuple[NodeSummary, ...]:
    from exporter.diagnostics.capacity_grid import figures, mean, share_below

    out = []
    for instance, mine in rows.items():
        f = figures(grid, mine)
        node_mean = mean(f.used)
        peak, headroom = hbm[instance].peak() if instance in hbm else (None, None)
        out.append(
            NodeSummary(
                instance,
                len(mine),
                node_mean,
                share_below(f.used, bounds.low),
                len(f.used) / f.points if f.points else 0.0,
                f.chip_hours,
                f.idle_hours,
                f.unused_hours,
                peak,
                headroom,
                _verdict(table, node_mean),
                data.inventory.get(instance, NodeInventory()),
            )
        )
    return tuple(out)


def _namespaces(spaces: Sequence[NamespaceFigures], bounds: Bounds, table: Thresholds) -> tuple[NamespaceSummary, ...]:
    from exporter.diagnostics.capacity_grid import mean, share_below

    out = []
    for space in spaces:
        space_mean = mean(space.util)
        out.append(
            NamespaceSummary(
                space.namespace,
                space.most_chips,
                space.chip_hours,
                space_mean,
                share_below(space.util, bounds.low),
                _verdict(table, space_mean),
            )
        )
    return tuple(out)


def _owners(grid: Grid, bounds: Bounds, table: Thresholds) -> tuple[OwnerSummary, ...]:
    from exporter.diagnostics.capacity_grid import owner_figures

    f = owner_figures(grid, bounds.low)
    return owner_summaries(f.names, (f.most_chips, f.chip_hours, f.idle_hours, f.unused_hours, f.mean, f.below_share), table)


# --- forecasts -----------------------------------------------------------------------------------------


def _forecasts(
    data: CapacityInput,
    allocation: Sequence[tuple[float, float, float, float]],
    hbm: Mapping[str, Hbm],
    bounds: Bounds,
    horizon: float,
) -> tuple[Forecast, ...]:
    out: list[Forecast | None] = []
    if allocation:
        in_use = daily(((t, used) for t, _, used, _ in allocation), data.start)
        chips = max(total for _, total, _, _ in allocation)
        out.append(forecast("chips in use", "count", in_use, data.end, horizon, limit=chips))
        util = [(t, busy / used) for t, _, used, busy in allocation if used]
        out.append(forecast("mean utilization of chips in use", "ratio", daily(util, data.start), data.end, horizon))
    out += _hbm_forecasts(data, hbm, bounds, horizon)
    return tuple(f for f in out if f is not None)


def _hbm_forecasts(data: CapacityInput, hbm: Mapping[str, Hbm], bounds: Bounds, horizon: float, keep: int = 3) -> list[Forecast]:
    """The nodes whose daily peak HBM use grows fastest towards the limit (at most ``keep``)."""
    found = []
    for instance, node in hbm.items():
        peaks = node.daily_peaks(data.start)
        item = forecast(f"HBM used on {instance}", "ratio", peaks, data.end, horizon, limit=bounds.hbm_full)
        if item is not None and item.slope_per_day > 1e-4:
            found.append(item)
    found.sort(key=lambda f: -f.at(data.end + horizon * DAY))
    return found[:keep]


# --- written findings ----------------------------------------------------------------------------------

NAMED_IN_SUMMARY = 10  # chips below the bound named in the summary; the section's table names them all


def findings(r: CapacityReport) -> list[str]:
    t = r.totals
    b = r.bounds
    out = []
    if r.requested is not None:
        out.append(
            f"Prometheus holds {format_duration(r.covered)} of data of the {format_duration(r.requested)} asked "
            f"for: this report covers what exists."
        )
    out += [
        (
            f"{count_text(t['chips'], 'chip')} on {count_text(t['nodes'], 'node')}; {pct_text(t['allocation'])} of chip time in use "
            "(a process, pod or job on the chip)."
        ),
        (
            f"Chips in use averaged {pct_text(t['mean_utilization_in_use'])} AI Core utilization ({r.verdict}: healthy "
            f"> {b.healthy * 100:g}%, abnormal < {b.low * 100:g}%); {pct_text(t['below_share'])} of their time was below "
            f"{b.low * 100:g}%."
        ),
        (
            f"Idle chip-hours: {hours_text(t['idle_chip_hours'])} of {hours_text(t['chip_hours'])} "
            f"({pct_text(t['idle_share'])}) with nothing on the chip; unused (not busy) chip-hours: "
            f"{hours_text(t['unused_chip_hours'])}."
        ),
    ]
    low = [n for n in r.nodes if n.verdict == ABNORMAL]
    if low:
        out.append(
            "Nodes below the low-utilization bound: " + ", ".join(f"{n.instance} ({pct_text(n.mean_utilization)})" for n in low) + "."
        )
    if r.chips_below:
        named = ", ".join(f"{c.subject} ({pct_text(c.mean_utilization)})" for c in r.chips_below[:NAMED_IN_SUMMARY])
        more = len(r.chips_below) - NAMED_IN_SUMMARY
        rest = f", and {more} more (all in the table below)" if more > 0 else ""
        out.append(f"Chips in use averaging below {b.low * 100:g}%: {named}{rest}.")
    idle_nodes = sorted((n for n in r.nodes if n.idle_chip_hours > 0), key=lambda n: -n.idle_chip_hours)[:3]
    if idle_nodes:
        out.append("Most idle chip-hours: " + ", ".join(f"{n.instance} ({hours_text(n.idle_chip_hours)} h)" for n in idle_nodes) + ".")
    out += owner_findings(r.owners)
    full = [n for n in r.nodes if n.hbm_peak_ratio is not None and n.hbm_peak_ratio > b.hbm_full]
    if full:
        out.append(
            "HBM above " + f"{b.hbm_full * 100:g}%: " + ", ".join(f"{n.instance} ({pct_text(n.hbm_peak_ratio)})" for n in full) + "."
        )
    out += [forecast_text(f) for f in r.forecasts if forecast_text(f)]
    return out
