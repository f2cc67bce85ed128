"""Energy per chip: the power reads integrated over time (npu_energy_joules_total).

npu-smi prints power, never energy, so the source integrates its own reads: between two
successive reads of one chip the energy is the trapezoid ``(w0 + w1) / 2 * dt``. Only observed
intervals count: when the reads are further apart than ``GAP_PERIODS`` sampling periods
(npu-smi failed, the exporter was stalled, the chip was away), nothing is added for that
interval and it is counted as skipped; the next read starts a new interval. The total only
ever grows while the process lives; a restart starts it at 0 (a counter reset, which
``rate()`` and ``increase()`` handle).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

GAP_PERIODS = 3.0  # reads further apart than this many sampling periods are not integrated


@dataclass(frozen=True)
class PowerRead:
    at: float  # monotonic seconds
    watts: float


class EnergyIntegrator:
    """Joules per key (a chip) from its successive power reads, and the intervals skipped."""

    def __init__(self) -> None:
        self._last: dict[Hashable, PowerRead] = {}
        self._joules: dict[Hashable, float] = {}
        self.skipped_intervals = 0  # gaps longer than GAP_PERIODS periods, not integrated
        self.skipped_seconds = 0.0

    def add(self, key: Hashable, at: float, watts: float | None, period: float) -> None:
        """One power read of ``key`` taken at monotonic ``at``; ``period`` is its sampling period."""
        if watts is None or not math.isfinite(watts) or watts < 0:
            return  # not a reading: the previous one stays the interval's start
        read = PowerRead(at, watts)
        last = self._last.get(key)
        self._last[key] = read
        self._joules.setdefault(key, 0.0)
        if last is None:
            return
        elapsed = at - last.at
        if elapsed <= 0:
            return  # the same read twice: nothing elapsed
        if elapsed > GAP_PERIODS * period:
            self.skipped_intervals += 1
            self.skipped_seconds += elapsed
            return
        self._joules[key] += (last.watts + watts) / 2.0 * elapsed

    def joules(self, key: Hashable) -> float | None:
        """Energy of ``key`` since its first read; None before any read."""
        return self._joules.get(key)
