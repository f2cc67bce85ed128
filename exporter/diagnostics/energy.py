"""The capacity report's energy, as pure functions: kWh per chip and step (raw series) or the
hourly records' sums in; kWh per node, namespace and training job over the window out, with the
idle energy (chips idle, or in use below the low-utilization bound) and, given a price per kWh,
the cost beside each figure.

From the raw series every figure adds up the same per-chip, per-step kWh (the counter's
increase over the step), so nodes add up to the cluster: a chip-step counts for a namespace
when a pod of it had the chip in that step (the report's own namespaces), for a job when the
job's ``npu_job_info`` named the chip's device in that step (a chip shared in one step counts
for both). From the records the same attribution is the rules', at each evaluation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from exporter.diagnostics.capacity import CapacityInput
from exporter.diagnostics.capacity_text import cost_text, kwh_text

ChipKey = tuple[str, str, str, str]  # instance, npu, chip, device
Point = tuple[float, float]


@dataclass(frozen=True)
class EnergyTotals:
    """kWh over the window already added up per node (with its idle kWh), per namespace and per
    training job: the sums of the hourly records."""

    nodes: Mapping[str, float]
    idle: Mapping[str, float]
    namespaces: Mapping[str, float]
    jobs: Mapping[str, float]


@dataclass(frozen=True)
class EnergyInput:
    """From the raw series: per chip (the report's chip keys, node names applied) the kWh of each
    step and per (instance, device) the steps each training job named the device, the idle
    share classified here. From the hourly records: ``totals``."""

    kwh: Mapping[ChipKey, tuple[Point, ...]] = field(default_factory=dict)
    jobs: Mapping[tuple[str, str], Mapping[str, frozenset[float]]] = field(default_factory=dict)
    price: float | None = None  # per kWh, in the user's currency
    totals: EnergyTotals | None = None


@dataclass(frozen=True)
class EnergyRow:
    name: str
    kwh: float
    idle_kwh: float | None = None  # nodes only
    cost: float | None = None  # kwh x price, with a price
    idle_cost: float | None = None


@dataclass(frozen=True)
class EnergyReport:
    total_kwh: float
    idle_kwh: float
    nodes: tuple[EnergyRow, ...]
    namespaces: tuple[EnergyRow, ...]
    jobs: tuple[EnergyRow, ...]
    price: float | None = None
    low: float = 0.60  # the low-utilization bound idle energy counts below

    @property
    def total_cost(self) -> float | None:
        return None if self.price is None else self.total_kwh * self.price

    @property
    def idle_cost(self) -> float | None:
        return None if self.price is None else self.idle_kwh * self.price

    @property
    def idle_share(self) -> float | None:
        return self.idle_kwh / self.total_kwh if self.total_kwh > 0 else None


def analyse_energy(energy: EnergyInput, data: CapacityInput, low: float) -> EnergyReport | None:
    """The window's energy; None when no chip has an energy counter (older exporters, 310 cards).
    Per chip and step on the report's grid of points (numpy: no loop over points in Python)."""
    if energy.totals is not None:
        t = energy.totals
        if not t.nodes:
            return None
        return _report({n: (kwh, t.idle.get(n, 0.0)) for n, kwh in t.nodes.items()}, t.namespaces, t.jobs, energy.price, low)
    if not energy.kwh:
        return None
    import numpy as np

    from exporter.diagnostics import capacity_grid as cg

    grid = cg.build(data.chips, data.step, data.in_use_known)
    index = {(c.instance, c.npu, c.chip, c.device): i for i, c in enumerate(data.chips)}
    cells = np.zeros(grid.present.shape)  # kWh of each chip and step with a utilization point
    nodes: dict[str, list[float]] = {}
    for key, points in energy.kwh.items():
        values = _pairs(points)
        node = nodes.setdefault(key[0], [0.0, 0.0])
        node[0] += float(values[:, 1].sum())
        at = index.get(key)
        if at is not None:
            cols, found = _columns(grid.times, values[:, 0])
            cells[at, cols[found]] = values[found, 1]
    # idle, or in use below the bound (as chip:npu_energy_idle_joules:rate5m), per step
    idle = np.where(grid.present & (~grid.used | (grid.util < low)), cells, 0.0).sum(axis=1)
    for chip, kwh in zip(data.chips, idle.tolist(), strict=True):
        if chip.instance in nodes:
            nodes[chip.instance][1] += kwh
    per_space = np.bincount(grid.ns_index, weights=cells[grid.ns_row, grid.ns_col], minlength=len(grid.namespaces))
    spaces = {name: float(kwh) for name, kwh in zip(grid.namespaces, per_space.tolist(), strict=True) if kwh > 0}
    on_device: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(data.chips):
        on_device.setdefault((c.instance, c.device), []).append(i)
    jobs: dict[str, float] = {}
    for device, by_job in energy.jobs.items():
        for job, steps in by_job.items():
            cols, found = _columns(grid.times, np.fromiter(steps, np.float64, len(steps)))
            kwh = float(cells[np.ix_(on_device.get(device, []), cols[found])].sum())
            jobs[job] = jobs.get(job, 0.0) + kwh
    return _report({n: (kwh, idle) for n, (kwh, idle) in nodes.items()}, spaces, jobs, energy.price, low)


def _report(
    nodes: Mapping[str, tuple[float, float]], spaces: Mapping[str, float], jobs: Mapping[str, float], price: float | None, low: float
) -> EnergyReport:
    def row(name: str, kwh: float, idle: float | None = None) -> EnergyRow:
        if price is None:
            return EnergyRow(name, kwh, idle)
        return EnergyRow(name, kwh, idle, kwh * price, None if idle is None else idle * price)

    return EnergyReport(
        sum(v[0] for v in nodes.values()),
        sum(v[1] for v in nodes.values()),
        tuple(row(n, kwh, idle) for n, (kwh, idle) in sorted(nodes.items())),
        tuple(row(n, kwh) for n, kwh in sorted(spaces.items(), key=lambda i: (-i[1], i[0])) if kwh > 0),
        tuple(row(n, kwh) for n, kwh in sorted(jobs.items(), key=lambda i: (-i[1], i[0]))),
        price,
        low,
    )


def _pairs(points: tuple[Point, ...]) -> Any:
    """(N, 2) array of (time, value), built in C."""
    import numpy as np

    return np.fromiter(chain.from_iterable(points), np.float64, 2 * len(points)).reshape(-1, 2)


def _columns(times: Any, at: Any) -> tuple[Any, Any]:
    """Columns of ``at`` in the sorted ``times``, and which of them are there."""
    import numpy as np

    if not len(times):
        return np.zeros(len(at), dtype=np.int64), np.zeros(len(at), dtype=np.bool_)
    cols = np.minimum(np.searchsorted(times, at), len(times) - 1)
    return cols, times[cols] == at


def energy_findings(r: EnergyReport | None) -> list[str]:
    if r is None:
        return []
    cost = f", cost {cost_text(r.total_cost)}" if r.price is not None else ""
    idle_cost = f", cost {cost_text(r.idle_cost)}" if r.price is not None else ""
    share = f" ({r.idle_share * 100:.1f}%)" if r.idle_share is not None else ""
    out = [
        f"Energy: {kwh_text(r.total_kwh)} kWh{cost}; {kwh_text(r.idle_kwh)} kWh{share} spent by chips idle or in use "
        f"below {r.low * 100:g}%{idle_cost}."
    ]
    if r.jobs:
        top = ", ".join(f"{j.name} ({kwh_text(j.kwh)} kWh)" for j in r.jobs[:3])
        out.append(f"Most energy per training job: {top}.")
    return out
