"""The capacity report's chips as arrays: one row per chip, one column per step end, so that a
month of a 1,000-node fleet (8,000 chips x 720 hourly points) is reduced by numpy, with Python
looping over chips, nodes and namespaces only, never over points.

Sums the report shows are added in the order the points come (chip by chip, then time), as a
Python loop over the points adds them, and means are exactly rounded (``math.fsum``, as
``statistics.fmean``): the figures are those of the per-point definitions, bit for bit. Only
the charts' per-step means (a node's, a namespace's, the cluster's) add across chips in numpy
and may differ from an exactly rounded mean in the last bit, as may the owners' figures, added
per owner in numpy (there may be thousands of owners: Slurm jobs come and go). A chip's points
have distinct step ends (Prometheus range answers do).

numpy comes with the report's extra (matplotlib needs it); the exporter never imports this."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from exporter.diagnostics.capacity_owners import IDLE_UTILIZATION

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
Point = tuple[float, float]
DAY = 86400.0


class ChipPoints(Protocol):
    """What the grid reads of a chip (capacity.ChipHistory)."""

    @property
    def util(self) -> tuple[Point, ...]: ...
    @property
    def in_use(self) -> frozenset[float]: ...
    @property
    def namespace(self) -> tuple[tuple[float, str], ...]: ...
    @property
    def observed(self) -> tuple[Point, ...]: ...
    @property
    def unhealthy(self) -> frozenset[float]: ...
    @property
    def owners(self) -> tuple[tuple[float, str, str], ...]: ...


@dataclass(frozen=True)
class Grid:
    times: Floats  # (T,) every step end with a point, ascending
    present: Bools  # (C, T) the chip has a point at the step
    util: Floats  # (C, T) its utilization there, 0 where no point
    hours: Floats  # (C, T) hours observed in the step, 0 where no point
    used: Bools  # (C, T) in use (allocated and not paging) at a point
    namespaces: tuple[str, ...]  # sorted
    ns_row: Ints  # (E,) namespace entries at points: chip row
    ns_col: Ints  # step column
    ns_index: Ints  # index into namespaces
    idle: Bools  # (C, T) a point below IDLE_UTILIZATION, its health not paging
    owners: tuple[tuple[str, ...], ...]  # (runtime, owner), sorted
    own_row: Ints  # (O,) owner entries at points: chip row
    own_col: Ints  # step column
    own_index: Ints  # index into owners


def _pairs(points: Sequence[Point]) -> Floats:
    return np.fromiter(chain.from_iterable(points), np.float64, 2 * len(points)).reshape(-1, 2)


def _columns(times: Floats, at: Floats) -> tuple[Ints, Bools]:
    """Columns of ``at`` in ``times`` and which of them are there."""
    cols = np.minimum(np.searchsorted(times, at), max(len(times) - 1, 0)).astype(np.int64)
    return cols, times[cols] == at if len(times) else np.zeros(len(at), dtype=np.bool_)


def _cells(times: Floats, rows: Ints, at: Floats, shape: tuple[int, int]) -> Bools:
    """A mask of the (row, time) cells named, those off the grid left out."""
    out = np.zeros(shape, dtype=np.bool_)
    cols, found = _columns(times, at)
    out[rows[found], cols[found]] = True
    return out


def _stack(parts: Sequence[Collection[float]]) -> tuple[Ints, Floats]:
    """Each chip's times as one array, with the row each came from."""
    rows = np.repeat(np.arange(len(parts), dtype=np.int64), [len(p) for p in parts])
    at = np.concatenate([np.fromiter(p, np.float64, len(p)) for p in parts]) if parts else np.zeros(0)
    return rows, at


def build(chips: Sequence[ChipPoints], step: float, in_use_known: bool) -> Grid:
    pairs = [_pairs(c.util) for c in chips]
    everything = np.concatenate(pairs) if pairs else np.zeros((0, 2))
    times = np.unique(everything[:, 0])
    shape = (len(chips), len(times))
    rows = np.repeat(np.arange(len(chips), dtype=np.int64), [len(p) for p in pairs])
    cols, _ = _columns(times, everything[:, 0])
    present = np.zeros(shape, dtype=np.bool_)
    util = np.zeros(shape)
    present[rows, cols] = True
    util[rows, cols] = everything[:, 1]
    hours = np.where(present, step / 3600.0, 0.0)
    timed = [i for i, c in enumerate(chips) if c.observed]  # chips with sample timestamps: their own seconds
    if timed:
        seen = [_pairs(chips[i].observed) for i in timed]
        seen_rows = np.repeat(np.array(timed, dtype=np.int64), [len(s) for s in seen])
        at = np.concatenate(seen)
        seconds = np.zeros(shape)
        seen_cols, found = _columns(times, at[:, 0])
        seconds[seen_rows[found], seen_cols[found]] = at[found, 1]
        hours[timed] = np.where(present[timed], np.minimum(step, seconds[timed]) / 3600.0, 0.0)
    unhealthy = _cells(times, *_stack([c.unhealthy for c in chips]), shape)
    allocated = _cells(times, *_stack([c.in_use for c in chips]), shape) if in_use_known else util >= IDLE_UTILIZATION
    space_names, ns_row, ns_col, ns_index = _entries(times, present, [c.namespace for c in chips])
    owner_names, own_row, own_col, own_index = _entries(times, present, [c.owners for c in chips])
    return Grid(
        times,
        present,
        util,
        hours,
        present & ~unhealthy & allocated,
        tuple(name for (name,) in space_names),
        ns_row,
        ns_col,
        ns_index,
        present & ~unhealthy & (util < IDLE_UTILIZATION),
        tuple(owner_names),
        own_row,
        own_col,
        own_index,
    )


def _entries(
    times: Floats, present: Bools, per_chip: Sequence[Sequence[tuple[Any, ...]]]
) -> tuple[list[tuple[str, ...]], Ints, Ints, Ints]:
    """(sorted names, row, column, name index) of each chip's (step end, label, ...) tuples at its
    points, a name being the tuple of its labels; Python loops over chips, label columns and
    names, never over points (the tuples flattened and sliced into columns in C)."""
    width = next((len(p[0]) for p in per_chip if p), 1)
    flat = list(chain.from_iterable(chain.from_iterable(per_chip)))
    rows = np.repeat(np.arange(len(per_chip), dtype=np.int64), [len(p) for p in per_chip])
    at = np.array(flat[0::width], dtype=np.float64)
    names: list[tuple[str, ...]] = []
    index: Ints = np.zeros(0, dtype=np.int64)
    if len(at) and width > 1:
        labels = [_codes(flat[j::width]) for j in range(1, width)]
        sizes = tuple(len(unique) for unique, _ in labels)
        codes = np.ravel_multi_index(tuple(code for _, code in labels), sizes)
        keys, inverse = np.unique(codes, return_inverse=True)  # in the order of the labels' tuples
        index = np.asarray(inverse, dtype=np.int64).reshape(-1)
        parts = [
            np.array(unique, dtype=object)[code].tolist() for (unique, _), code in zip(labels, np.unravel_index(keys, sizes), strict=True)
        ]
        names = list(zip(*parts, strict=True))
    cols, found = _columns(times, at)
    keep = found.copy()
    keep[found] = present[rows[found], cols[found]]
    return names, rows[keep], cols[keep], index[keep]


def _codes(values: Sequence[str]) -> tuple[list[str], Ints]:
    """(the distinct values, sorted; each value's index among them): hashed, not sorted, in C."""
    unique = sorted(dict.fromkeys(values))
    code = dict(zip(unique, range(len(unique)), strict=True))
    return unique, np.fromiter(map(code.__getitem__, values), np.int64, len(values))


# --- reductions ------------------------------------------------------------------------------------


def total(values: Floats) -> float:
    """Added one after the other, in order (as ``sum`` over the points)."""
    return float(np.cumsum(values)[-1]) if len(values) else 0.0


def mean(values: Floats) -> float | None:
    """Exactly rounded, as statistics.fmean; None for no values."""
    return math.fsum(values) / len(values) if len(values) else None


def share_below(values: Floats, bound: float) -> float | None:
    return int(np.count_nonzero(values < bound)) / len(values) if len(values) else None


def busy(util: Floats) -> Floats:
    """Utilization clamped to 0..1 (NaN counts 0, as min(1, max(0, v)) gives)."""
    return np.clip(np.where(np.isnan(util), 0.0, util), 0.0, 1.0)


@dataclass(frozen=True)
class Figures:
    """Chip-hours and utilization of a set of chips (rows of the grid)."""

    points: int
    used: Floats  # utilizations of the points in use, chip by chip
    all_util: Floats
    chip_hours: float
    idle_hours: float
    unused_hours: float


def figures(grid: Grid, rows: Ints | slice) -> Figures:
    present, used = grid.present[rows], grid.used[rows]
    util, hours = grid.util[rows][present], grid.hours[rows][present]
    in_use = used[present]
    return Figures(
        int(np.count_nonzero(present)),
        util[in_use],
        util,
        total(hours),
        total(hours[~in_use]),
        total((1.0 - busy(util)) * hours),
    )


def by_instance(instances: Sequence[str]) -> dict[str, Ints]:
    """Rows of each instance, in order, instances sorted."""
    order: dict[str, list[int]] = {}
    for row, name in enumerate(instances):
        order.setdefault(name, []).append(row)
    return {name: np.array(order[name], dtype=np.int64) for name in sorted(order)}


def group_means(grid: Grid, rows: Ints | slice) -> tuple[Point, ...]:
    """The mean utilization of the rows at each step where any has a point."""
    count = grid.present[rows].sum(axis=0)
    sums = grid.util[rows].sum(axis=0)
    at = count > 0
    return tuple(zip(grid.times[at].tolist(), (sums[at] / count[at]).tolist(), strict=True))


def chip_means(grid: Grid, bound: float) -> list[tuple[int, float, float, float]]:
    """(row, mean utilization, share below ``bound``, hours) of each chip's points in use, for
    the chips in use at all."""
    out = []
    for row in np.flatnonzero(grid.used.any(axis=1)).tolist():
        mask = grid.used[row]
        values = grid.util[row][mask]
        out.append((row, math.fsum(values) / len(values), share_below(values, bound) or 0.0, total(grid.hours[row][mask])))
    return out


def allocation(grid: Grid) -> tuple[tuple[float, float, float, float], ...]:
    """(t, chips with a point, chips in use, busy chip-equivalents) per step, chips added in order."""
    chips = grid.present.sum(axis=0, dtype=np.float64)
    in_use = grid.used.sum(axis=0, dtype=np.float64)
    busy_sum = np.where(grid.present, busy(grid.util), 0.0).sum(axis=0)
    at = chips > 0
    return tuple(zip(grid.times[at].tolist(), chips[at].tolist(), in_use[at].tolist(), busy_sum[at].tolist(), strict=True))


@dataclass(frozen=True)
class NamespaceFigures:
    namespace: str
    most_chips: int
    chip_hours: float
    util: Floats
    series: tuple[Point, ...]  # mean utilization at each step


def namespace_figures(grid: Grid) -> list[NamespaceFigures]:
    width = len(grid.times)
    values = grid.util[grid.ns_row, grid.ns_col]
    hours = grid.hours[grid.ns_row, grid.ns_col]
    out = []
    for index, name in enumerate(grid.namespaces):
        mine = grid.ns_index == index
        if not mine.any():
            continue
        cols = grid.ns_col[mine]
        count = np.bincount(cols, minlength=width)
        sums = np.bincount(cols, weights=values[mine], minlength=width)
        at = count > 0
        series = tuple(zip(grid.times[at].tolist(), (sums[at] / count[at]).tolist(), strict=True))
        out.append(NamespaceFigures(name, int(count.max()), total(hours[mine]), values[mine], series))
    return out


@dataclass(frozen=True)
class OwnerFigures:
    """Per owner, most chip-hours first (then by runtime and owner), one list per figure."""

    names: list[tuple[str, ...]]  # (runtime, owner)
    most_chips: list[int]
    chip_hours: list[float]
    idle_hours: list[float]  # allocated but idle: held, not paging, below IDLE_UTILIZATION
    unused_hours: list[float]
    mean: list[float]
    below_share: list[float]


def owner_figures(grid: Grid, bound: float) -> OwnerFigures:
    """Each owner's figures over the chip-steps it held, every owner at once: entries grouped by
    owner (a stable sort, so chip by chip, then time), each figure one reduction per group."""
    if not len(grid.own_index):
        return OwnerFigures([], [], [], [], [], [], [])
    order = np.argsort(grid.own_index, kind="stable")
    index, rows, cols = grid.own_index[order], grid.own_row[order], grid.own_col[order]
    starts = np.flatnonzero(np.concatenate(([True], index[1:] != index[:-1])))
    points = np.diff(np.append(starts, len(index)))
    values, hours = grid.util[rows, cols], grid.hours[rows, cols]
    sums = [
        np.add.reduceat(a, starts)
        for a in (hours, np.where(grid.idle[rows, cols], hours, 0.0), (1.0 - busy(values)) * hours, values, (values < bound) * 1.0)
    ]
    # most chips at once: entries per (owner, step), the largest per owner (one entry per chip and step)
    width = max(len(grid.times), 1)
    per_step, count = np.unique(index * width + cols, return_counts=True)
    owner_of = per_step // width
    most = np.maximum.reduceat(count, np.flatnonzero(np.concatenate(([True], owner_of[1:] != owner_of[:-1]))))
    rank = np.argsort(-sums[0], kind="stable")  # owners are sorted by runtime and owner: ties keep that order
    names = [grid.owners[i] for i in index[starts][rank].tolist()]
    return OwnerFigures(
        names,
        most[rank].tolist(),
        sums[0][rank].tolist(),
        sums[1][rank].tolist(),
        sums[2][rank].tolist(),
        (sums[3] / points)[rank].tolist(),
        (sums[4] / points)[rank].tolist(),
    )


# --- HBM ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hbm:
    """A node's HBM at the step ends where both used and total exist, in the order of ``used``."""

    times: Floats
    used: Floats
    total: Floats

    @staticmethod
    def of(used: Sequence[Point], total: Sequence[Point]) -> Hbm:
        u, t = _pairs(used), _pairs(total)
        order = np.argsort(t[:, 0], kind="stable")
        cols, found = _columns(t[order, 0], u[:, 0])
        return Hbm(u[found, 0], u[found, 1], t[order, 1][cols[found]])

    def headroom(self) -> tuple[Point, ...]:
        return tuple(zip(self.times.tolist(), (self.total - self.used).tolist(), strict=True))

    def ratios(self) -> tuple[Floats, Floats]:
        """(times, used / total) where total is not 0."""
        some = self.total != 0
        return self.times[some], self.used[some] / self.total[some]

    def peak(self) -> tuple[float | None, float | None]:
        """(highest used / total, lowest bytes free)."""
        _, ratios = self.ratios()
        free = self.total - self.used
        return (float(ratios.max()) if len(ratios) else None), (float(free.min()) if len(free) else None)

    def daily_peaks(self, start: float) -> tuple[Point, ...]:
        """The highest ratio of each whole day from ``start``, at the day's middle (forecast.daily's 'max')."""
        times, ratios = self.ratios()
        if not len(times):
            return ()
        days = np.floor_divide(times - start, DAY)
        order = np.argsort(days, kind="stable")
        days, ratios = days[order], ratios[order]
        first = np.flatnonzero(np.concatenate(([True], days[1:] != days[:-1])))
        peaks = np.maximum.reduceat(ratios, first)
        return tuple(zip((start + (days[first] + 0.5) * DAY).tolist(), peaks.tolist(), strict=True))
