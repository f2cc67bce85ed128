"""The capacity report's energy, as pure functions: kWh per chip and step in, kWh per node,
namespace and training job over the window out, with the idle energy (chips idle, or in use
below the low-utilization bound) and, given a price per kWh, the cost beside each figure.

Every figure adds up the same per-chip, per-step kWh (``npu_energy_joules_total``'s increase
over the step, or its hourly record), so nodes add up to the cluster. A chip-step counts for a
namespace when a pod of it had the chip in that step (the report's own namespaces), for a job
when the job's ``npu_job_info`` named the chip's device in that step; a chip shared by two
namespaces or jobs in one step counts for both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from exporter.diagnostics.capacity import CapacityInput, ChipHistory, _in_use

ChipKey = tuple[str, str, str, str]  # instance, npu, chip, device
Point = tuple[float, float]


@dataclass(frozen=True)
class EnergyInput:
    """Per chip (the report's chip keys, node names applied) the kWh of each step; per chip
    the idle kWh of each step where the recording rules give them (else from utilization);
    per (instance, device) the steps each training job named the device."""

    kwh: Mapping[ChipKey, tuple[Point, ...]]
    idle: Mapping[ChipKey, tuple[Point, ...]] | None = None  # None: classify each step here
    jobs: Mapping[tuple[str, str], Mapping[str, frozenset[float]]] = field(default_factory=dict)
    price: float | None = None  # per kWh, in the user's currency


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


def _idle_points(chip: ChipHistory, kwh: Mapping[float, float], low: float, known: bool) -> Iterable[float]:
    """kWh of the steps where the chip was idle or in use below ``low`` (as chip:npu_energy_idle_joules:rate5m)."""
    for t, value in chip.util:
        if t in kwh and (not _in_use(chip, t, value, known) or value < low):
            yield kwh[t]


def analyse_energy(energy: EnergyInput, data: CapacityInput, low: float) -> EnergyReport | None:
    """The window's energy; None when no chip has an energy counter (older exporters, 310 cards)."""
    if not energy.kwh:
        return None
    chips = {(c.instance, c.npu, c.chip, c.device): c for c in data.chips}
    nodes: dict[str, list[float]] = {}
    spaces: dict[str, float] = {}
    jobs: dict[str, float] = {}
    for key, points in energy.kwh.items():
        per_step = dict(points)
        chip = chips.get(key)
        if energy.idle is not None:
            idle = sum(v for _, v in energy.idle.get(key, ()))
        else:
            idle = sum(_idle_points(chip, per_step, low, data.in_use_known)) if chip else 0.0
        node = nodes.setdefault(key[0], [0.0, 0.0])
        node[0] += sum(per_step.values())
        node[1] += idle
        for t, namespace in chip.namespace if chip else ():
            spaces[namespace] = spaces.get(namespace, 0.0) + per_step.get(t, 0.0)
        for job, steps in energy.jobs.get((key[0], key[3]), {}).items():
            jobs[job] = jobs.get(job, 0.0) + sum(v for t, v in per_step.items() if t in steps)
    price = energy.price

    def row(name: str, kwh: float, idle: float | None = None) -> EnergyRow:
        if price is None:
            return EnergyRow(name, kwh, idle)
        return EnergyRow(name, kwh, idle, kwh * price, None if idle is None else idle * price)

    return EnergyReport(
        sum(v[0] for v in nodes.values()),
        sum(v[1] for v in nodes.values()),
        tuple(row(n, kwh, idle) for n, (kwh, idle) in sorted(nodes.items())),
        tuple(row(n, kwh) for n, kwh in sorted(spaces.items(), key=lambda i: (-i[1], i[0]))),
        tuple(row(n, kwh) for n, kwh in sorted(jobs.items(), key=lambda i: (-i[1], i[0]))),
        price,
        low,
    )


def kwh_text(value: float | None) -> str:
    """kWh with the precision they need: 1,234 / 56.7 / 3.21 / 0.049."""
    if value is None:
        return "n/a"
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.2g}"


def cost_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


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
