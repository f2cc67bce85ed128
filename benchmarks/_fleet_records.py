"""The report's hourly records (exporter/generate/recording.py, `_report_hours` and
``chip:npu_aicore_utilization_ratio:avg1h``) for the part of the fleet's month before its raw
window, computed from the same simulated samples as OpenMetrics, one sample per record per
hour: what the rules would have recorded had Prometheus held the raw samples then.

Evaluating the rules on a month of raw samples is what made the 30-day benchmark take hours
(promtool evaluates every rule at every rollup interval through Prometheus); the report reads
only these records, at whole hours from the data's end, so they are written directly, at those
hours. Per hour ending at t (samples in (t - 1h, t], left-open as Prometheus 3 reads ranges):

- ``chip:npu_aicore_utilization_ratio:avg1h``: the mean of the chip's samples;
- ``chip:npu_in_use:max1h``: 1 if a job was on the chip at one of them, else 0;
- ``chip:npu_observed_seconds:sum1h``: the rollup evaluations (every ``rollup`` seconds back from t)
  through whose interval the chip was observed (a sample in it and in the one before), times the
  interval;
- ``chip:npu_pod_info:max1h``: 1 per namespace whose job had the chip;
- ``instance:npu_hbm_used_bytes:avg1h`` / ``..._total_...``: per node, the chips' means, summed;
- with the history's ``energy``: ``instance:npu_energy_kwh:sum1h`` (the chips' energy in the hour,
  as the counter integrates it), ``instance:npu_energy_idle_kwh:sum1h`` (the part drawn at steps
  where a chip was not in use or below the low-utilization bound) and
  ``instance_namespace:npu_energy_kwh:sum1h`` (per namespace of the pod on the chip at the hour's
  end, as the rule joins npu_pod_info then). The fleet has no training-job series, so
  ``instance_job_name:npu_energy_kwh:sum1h`` has none (as the rules give).

The fleet has no health series, so ``chip:npu_unhealthy:max1h`` has none (as the rules give).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from benchmarks._fleet_history import (
    BUSY_WATTS,
    HBM_TOTAL_BYTES,
    HOUR,
    IDLE_WATTS,
    NAMESPACES,
    FleetHistory,
    Step,
    WindowStats,
    _lines,
    _objects,
    write_openmetrics,
)
from exporter.thresholds.records import (
    JOULES_PER_KWH,
    NODE_IDLE_KWH,
    NODE_KWH,
    NODE_NAMESPACE_KWH,
    REPORT_HBM_TOTAL,
    REPORT_HBM_USED,
    REPORT_IN_USE,
    REPORT_NAMESPACE,
    REPORT_OBSERVED,
    REPORT_UTIL,
)

MIB = 1 << 20
LOW_UTILIZATION = 60  # percent: NPULowUtilization's bound in the shipped threshold table


class HourlyRecords:
    """Writes the records of each whole hour (from the history's end) before its raw window,
    window by window in time order, moving the history's state through those steps."""

    def __init__(self, history: FleetHistory, rollup: int) -> None:
        s = history.scale
        if rollup % s.resolution or HOUR % rollup:
            raise ValueError(f"the rollup interval ({rollup} s) must be whole resolutions ({s.resolution} s) and divide an hour")
        self.history = history
        self.rollup = rollup
        self.per_hour = HOUR // s.resolution
        self.keep = self.per_hour + 2 * (rollup // s.resolution)  # the hour and the first evaluation's interval before
        self._recent: list[Step] = []
        chips, nodes = history.chip_labels(), history.node_labels()
        self._util = _objects(f"{REPORT_UTIL}{{{x}}} " for x in chips)
        self._in_use = _objects(f"{REPORT_IN_USE}{{{x}}} " for x in chips)
        self._observed = _objects(f"{REPORT_OBSERVED}{{{x}}} " for x in chips)
        self._spaces = [_objects(f'{REPORT_NAMESPACE}{{{x},namespace="{ns}"}} 1' for x in chips) for ns in NAMESPACES]
        self._hbm_used = _objects(f"{REPORT_HBM_USED}{{{x}}} " for x in nodes)
        self._hbm_total = _objects(f"{REPORT_HBM_TOTAL}{{{x}}} " for x in nodes)
        self._kwh = _objects(f"{NODE_KWH}{{{x}}} " for x in nodes)
        self._idle_kwh = _objects(f"{NODE_IDLE_KWH}{{{x}}} " for x in nodes)
        self._space_kwh = _objects(f'{NODE_NAMESPACE_KWH}{{{x},namespace="{ns}"}} ' for x in nodes for ns in NAMESPACES)

    def write(self, path: Path, first: int, last: int) -> WindowStats:
        """The records of the hours ending from ``first`` to ``last`` (unix seconds, inclusive)."""
        return write_openmetrics(path, self._hours(first, last))

    def _hours(self, first: int, last: int) -> Iterator[tuple[str, int]]:
        h = self.history
        for step, t in h.steps(first, last):
            self._recent = [*self._recent[1 - self.keep :], h.state(step)]
            if (h.end - t) % HOUR == 0:
                yield self._hour_text(t)

    def _hour_text(self, t: int) -> tuple[str, int]:
        hour = self._recent[-self.per_hour :]
        live = np.stack([s.live for s in hour])
        seen = live.any(axis=0)
        if not seen.any():
            return "", 0
        count = live.sum(axis=0)
        util = np.stack([s.percent for s in hour]).sum(axis=0, where=live) / np.maximum(count, 1) / 100
        in_use = np.stack([s.in_use for s in hour]).any(axis=0)
        used = np.stack([s.used for s in hour]).sum(axis=0, where=live, dtype=np.float64) / np.maximum(count, 1) * MIB
        chips = self.history.scale.chips
        node_seen = seen.reshape(-1, chips).any(axis=1)
        node_used = np.where(seen, used, 0.0).reshape(-1, chips).sum(axis=1)
        node_total = seen.reshape(-1, chips).sum(axis=1) * float(HBM_TOTAL_BYTES)
        observed = self._observed_seconds()
        ts = f" {t}\n"
        parts = [
            _lines(self._util[seen], np.round(util[seen], 6).astype(str), ts),
            _lines(self._in_use[seen], in_use[seen].astype(np.int64).astype(str), ts),
            _lines(self._observed[observed > 0], observed[observed > 0].astype(str), ts),
            _lines(self._hbm_used[node_seen], node_used[node_seen].astype(np.int64).astype(str), ts),
            _lines(self._hbm_total[node_seen], node_total[node_seen].astype(np.int64).astype(str), ts),
        ]
        samples = 2 * int(seen.sum()) + int((observed > 0).sum()) + 2 * int(node_seen.sum())
        spaces = self._namespaces(hour)
        for index, chips_of in enumerate(spaces):
            parts.append(_lines(self._spaces[index][chips_of], None, ts))
            samples += int(chips_of.sum())
        if self.history.energy:
            text, count = self._energy_text(hour, node_seen, ts)
            parts.append(text)
            samples += count
        return "".join(parts), samples

    def _energy_text(self, hour: list[Step], node_seen: np.ndarray, ts: str) -> tuple[str, int]:
        """Per node: kWh of its chips in the hour, the idle part, and per namespace."""
        chips, resolution = self.history.scale.chips, self.history.scale.resolution
        live = np.stack([s.live for s in hour])
        percent = np.stack([s.percent for s in hour])
        joules = np.where(live, IDLE_WATTS + BUSY_WATTS * percent / 100.0, 0.0) * resolution
        busy = np.stack([s.in_use for s in hour]) & (percent >= LOW_UTILIZATION)
        chip_kwh = joules.sum(axis=0) / JOULES_PER_KWH
        node_kwh = chip_kwh.reshape(-1, chips).sum(axis=1)
        node_idle = np.where(busy, 0.0, joules).sum(axis=0).reshape(-1, chips).sum(axis=1) / JOULES_PER_KWH
        job = hour[-1].job_of  # the pod on each chip at the hour's end
        space = np.where(job >= 0, self.history.jobs.namespace[np.maximum(job, 0)], -1)
        per_space = np.zeros((len(node_kwh), len(NAMESPACES)))
        on_pod = space >= 0
        np.add.at(per_space, (np.flatnonzero(on_pod) // chips, space[on_pod]), chip_kwh[on_pod])
        has_space = np.zeros_like(per_space, dtype=bool)
        has_space[np.flatnonzero(on_pod) // chips, space[on_pod]] = True
        text = "".join(
            (
                _lines(self._kwh[node_seen], _texts(node_kwh[node_seen]), ts),
                _lines(self._idle_kwh[node_seen], _texts(node_idle[node_seen]), ts),
                _lines(self._space_kwh[has_space.ravel()], _texts(per_space[has_space]), ts),
            )
        )
        return text, 2 * int(node_seen.sum()) + int(has_space.sum())

    def _observed_seconds(self) -> np.ndarray:
        """Per chip: evaluations every ``rollup`` back from the hour's end through whose interval
        it was observed (a sample in the interval and in the one before), times the interval."""
        per = self.rollup // self.history.scale.resolution
        live = np.stack([s.live for s in self._recent])
        evaluations = np.zeros(live.shape[1], dtype=np.int64)
        end = len(self._recent)
        for k in range(HOUR // self.rollup):
            now = live[max(0, end - (k + 1) * per) : end - k * per].any(axis=0)
            before = live[max(0, end - (k + 2) * per) : max(0, end - (k + 1) * per)].any(axis=0)
            evaluations += now & before
        return evaluations * self.rollup

    def _namespaces(self, hour: list[Step]) -> list[np.ndarray]:
        """Per namespace, the chips a job of which it ran was on in the hour."""
        jobs = np.stack([s.job_of for s in hour])
        space = np.where(jobs >= 0, self.history.jobs.namespace[np.maximum(jobs, 0)], -1)
        return [(space == index).any(axis=0) for index in range(len(NAMESPACES))]


def _texts(values: np.ndarray) -> np.ndarray:
    return _objects(f"{v:.6g}" for v in values)
