"""A synthetic NPU fleet's history as OpenMetrics text: what Prometheus would have scraped from
cann-exporter on every node, one sample per series per resolution step, written window by
window straight to disk (one file per TSDB block window, never the whole history in memory).

The fleet (seeded, so every run writes the same bytes):

- nodes of ``chips`` 910B3 chips (64 GiB HBM), labels as the exporter serves them
  (``npu``, ``chip``, ``device``) plus the target labels Prometheus adds (``job``, ``instance``);
- training jobs take 8, 4, 2 or 1 chips of a node for 6 h to 4 days; between jobs a node is
  idle for a while that shortens over the period (demand grows: the capacity trend panels
  have a slope to project);
- a job's chips run near its mean utilization (most 70-97%, a fifth underused at 25-60%, a
  few allocated but nearly unused) with per-chip bias and noise, in whole percent as npu-smi
  prints; HBM use is the job's footprint;
- a chip in use has a process (``npu_process_memory_bytes`` with the job's pid: new series per
  job, the churn a real fleet has) and a pod (``npu_pod_info`` with its namespace);
- a twentieth of the nodes join halfway through (the fleet grows) and one in fifty is down
  for 6 hours (no samples: a scrape gap the chip-hours must not count).

Series per chip: ``npu_up``, ``npu_aicore_utilization_ratio``, ``npu_hbm_used_bytes``,
``npu_hbm_total_bytes`` always, ``npu_process_memory_bytes`` and ``npu_pod_info`` while in use;
``npu_devices`` per node; with ``energy``, ``npu_energy_joules_total`` too (IDLE_WATTS plus
BUSY_WATTS x utilization, integrated over each resolution step). These are every raw series the capacity rules, dashboard and report
read; training-job (hooks) series are left out: the in-use rule's job branch then reads nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

JOB = "cann-exporter"
HBM_TOTAL_BYTES = 65536 << 20  # a 910B3: npu-smi's 65536 MB are MiB
IDLE_HBM_MIB = 3200  # what an idle 910B3 reports used (driver and runtime)
NAMESPACES = (
    "llm-pretrain",
    "llm-finetune",
    "llm-eval",
    "speech",
    "vision",
    "recsys",
    "search",
    "ads",
    "robotics",
    "research-a",
    "research-b",
    "research-c",
    "platform",
    "batch",
    "mlops",
    "sandbox",
)
HOUR, DAY = 3600, 86400
IDLE_WATTS, BUSY_WATTS = 90.0, 260.0  # a 910B3's draw idle, and what full AI Core use adds


@dataclasses.dataclass(frozen=True)
class FleetScale:
    nodes: int = 1000
    chips: int = 8
    days: float = 30.0
    resolution: int = 300  # seconds between samples

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.chips < 1 or self.days <= 0 or self.resolution < 1:
            raise ValueError(f"a fleet needs nodes, chips, days and a resolution above zero: {self}")

    @property
    def steps(self) -> int:
        return int(self.days * DAY // self.resolution)

    def describe(self) -> str:
        days = f"{self.days:g} days"
        return (
            f"{self.nodes:,} nodes x {self.chips} chips ({self.nodes * self.chips:,} chips) over {days} "
            f"at {self.resolution // 60 if self.resolution % 60 == 0 else self.resolution}"
            f"{'-minute' if self.resolution % 60 == 0 else ' s'} resolution"
        )


@dataclasses.dataclass
class WindowStats:
    samples: int = 0
    bytes: int = 0


@dataclasses.dataclass(frozen=True)
class Step:
    """The fleet at one sample time."""

    on: np.ndarray  # per node: scraped
    live: np.ndarray  # per chip: scraped (its node on)
    in_use: np.ndarray  # per chip: a job on it
    percent: np.ndarray  # per chip: AI Core utilization, whole percent
    used: np.ndarray  # per chip: HBM used, MiB
    job_of: np.ndarray  # per chip: its job, -1 without


@dataclasses.dataclass(frozen=True)
class Jobs:
    """Every job of the fleet, grouped by node in time order (``first[n]`` .. ``first[n + 1]``),
    each node's list ending with a sentinel that never starts."""

    first: np.ndarray  # index of each node's first job; len nodes + 1
    start: np.ndarray  # step the job starts
    end: np.ndarray  # step after its last
    chips: np.ndarray  # chips it takes (0 .. chips-1 of the node)
    util: np.ndarray  # mean AI Core utilization, 0..1
    hbm_mib: np.ndarray  # HBM it uses per chip
    namespace: np.ndarray  # index into NAMESPACES


def _jobs(scale: FleetScale, rng: np.random.Generator, joins: np.ndarray) -> Jobs:
    per_hour = HOUR / scale.resolution
    starts, ends, chips, utils, hbms, spaces, first = [], [], [], [], [], [], []
    sizes = [k for k in (8, 4, 2, 1) if k <= scale.chips] or [scale.chips]
    weights = np.array([0.6, 0.2, 0.1, 0.1][: len(sizes)])
    for node in range(scale.nodes):
        first.append(len(starts))
        t = int(joins[node])
        while t < scale.steps:
            progress = t / max(1, scale.steps)
            gap_hours = rng.exponential(36.0 - 28.0 * progress)  # idle spells shorten: demand grows
            t += int(gap_hours * per_hour)
            length = int(rng.uniform(6, 96) * per_hour)
            kind = rng.random()
            util = rng.uniform(0.70, 0.97) if kind < 0.75 else rng.uniform(0.25, 0.60) if kind < 0.95 else rng.uniform(0.0, 0.05)
            starts.append(t)
            ends.append(t + max(1, length))
            chips.append(min(scale.chips, int(rng.choice(sizes, p=weights / weights.sum()))))
            utils.append(util)
            hbms.append(int(rng.uniform(0.35, 0.95) * (HBM_TOTAL_BYTES >> 20)))
            spaces.append(int(rng.integers(len(NAMESPACES))))
            t += length
        starts.append(1 << 40)  # the sentinel
        ends.append(1 << 40)
        chips.append(0)
        utils.append(0.0)
        hbms.append(0)
        spaces.append(0)
    first.append(len(starts))
    return Jobs(np.array(first), np.array(starts), np.array(ends), np.array(chips), np.array(utils), np.array(hbms), np.array(spaces))


class FleetHistory:
    """Writes the fleet's samples window by window, in time order (``write`` keeps its place:
    call it for consecutive windows)."""

    def __init__(self, scale: FleetScale, end: int, seed: int = 15, raw_days: float | None = None, energy: bool = False) -> None:
        self.scale = scale
        self.energy = energy
        self.end = end - end % scale.resolution  # the last sample's time
        self.start = self.end - (scale.steps - 1) * scale.resolution  # the first sample's time
        raw_steps = scale.steps if raw_days is None else min(scale.steps, max(1, int(raw_days * DAY // scale.resolution)))
        self.raw_start = self.end - (raw_steps - 1) * scale.resolution  # raw samples from here; before: hourly records
        rng = np.random.default_rng(seed)
        n, c = scale.nodes, scale.chips
        late = rng.random(n) < 0.05
        self.joins = np.where(late, rng.integers(scale.steps // 3, max(scale.steps // 3 + 1, 2 * scale.steps // 3), n), 0)
        down = rng.random(n) < 0.02
        self.out_start = np.where(down, rng.integers(0, scale.steps, n), -1)
        self.out_end = np.where(down, self.out_start + 6 * HOUR // scale.resolution, -1)
        self.jobs = _jobs(scale, rng, self.joins)
        self.chip_bias = rng.normal(0.0, 0.03, (n, c))
        self.chip_hbm = rng.integers(0, 512, (n, c))
        self.pids = rng.integers(1000, 4_000_000, len(self.jobs.start))
        self._noise = np.random.default_rng(seed + 1)
        self._cursor = self.jobs.first[:-1].copy()
        self._step = 0
        labels = [
            f'job="{JOB}",instance="{_instance(node)}",npu="{chip}",chip="0",device="{chip}"' for node in range(n) for chip in range(c)
        ]
        self._labels = labels
        self._up = _objects(f"npu_up{{{x}}} 1" for x in labels)
        self._total = _objects(f"npu_hbm_total_bytes{{{x}}} {HBM_TOTAL_BYTES}" for x in labels)
        self._util = _objects(f"npu_aicore_utilization_ratio{{{x}}} " for x in labels)
        self._used = _objects(f"npu_hbm_used_bytes{{{x}}} " for x in labels)
        self._energy = _objects(f"npu_energy_joules_total{{{x}}} " for x in labels)
        self._joules = np.zeros(n * c)
        self._devices = _objects(f'npu_devices{{job="{JOB}",instance="{_instance(node)}"}} {c}' for node in range(n))
        self._percent = _objects(f"{p / 100:g}" for p in range(101))
        self._bytes: dict[int, str] = {}
        self._process = np.full(n * c, "", dtype=object)  # each chip's process and pod series, for its job
        self._pod = np.full(n * c, "", dtype=object)
        self._job_of = np.full(n * c, -1)
        self.process_series = 0

    def windows(self, block: int) -> Iterator[tuple[int, int]]:
        """(first, last) sample times of each block window (multiples of ``block`` seconds since
        the epoch, as promtool and Prometheus align blocks) that holds raw samples."""
        return self._windows(self.raw_start, self.end, block)

    def record_windows(self, block: int) -> Iterator[tuple[int, int]]:
        """The block windows before the raw samples (their hours are written as records)."""
        return self._windows(self.start, self.raw_start - self.scale.resolution, block)

    def _windows(self, first: int, last: int, block: int) -> Iterator[tuple[int, int]]:
        t = first
        while t <= last:
            stop = min(last, (t // block + 1) * block - 1)
            yield t, stop - (stop - self.start) % self.scale.resolution
            t = (t // block + 1) * block
            t += (self.start - t) % self.scale.resolution

    def write(self, path: Path, first: int, last: int) -> WindowStats:
        """The samples from ``first`` to ``last`` (inclusive, unix seconds) into ``path``."""
        return write_openmetrics(path, (self._step_text(step) for step, _ in self.steps(first, last)))

    def steps(self, first: int, last: int) -> Iterator[tuple[int, int]]:
        """(step, time) from ``first`` to ``last`` (inclusive, unix seconds), which must follow
        the steps already taken (the state moves on with each)."""
        steps = range((first - self.start) // self.scale.resolution, (last - self.start) // self.scale.resolution + 1)
        if steps.start != self._step:
            raise ValueError(f"windows must follow each other: step {steps.start}, expected {self._step}")
        for step in steps:
            yield step, self.start + step * self.scale.resolution
            self._step = step + 1

    def chip_labels(self) -> list[str]:
        return list(self._labels)

    def node_labels(self) -> list[str]:
        return [f'job="{JOB}",instance="{_instance(node)}"' for node in range(self.scale.nodes)]

    def state(self, step: int) -> Step:
        """The fleet at ``step`` (steps in order: the jobs' cursor and the noise move on)."""
        jobs, n, c = self.jobs, self.scale.nodes, self.scale.chips
        on = (step >= self.joins) & ~((step >= self.out_start) & (step < self.out_end))
        self._cursor[jobs.end[self._cursor] <= step] += 1
        job = self._cursor
        running = on & (jobs.start[job] <= step) & (step < jobs.end[job])
        in_use = (running[:, None] & (np.arange(c)[None, :] < jobs.chips[job][:, None])).ravel()
        util = jobs.util[job][:, None] + self.chip_bias + self._noise.normal(0.0, 0.04, (n, c))
        percent = np.where(in_use, np.clip(np.rint(util.ravel() * 100), 0, 100).astype(np.int64), 0)
        used = np.where(in_use, (jobs.hbm_mib[job][:, None] + self.chip_hbm).ravel(), IDLE_HBM_MIB)
        job_of = np.where(in_use, np.repeat(job, c), -1)
        self._start_jobs(job_of)
        return Step(on, np.repeat(on, c), in_use, percent, used, job_of)

    def _step_text(self, step: int) -> tuple[str, int]:
        ts = f" {self.start + step * self.scale.resolution}\n"
        state = self.state(step)
        on, live, in_use, percent, used = state.on, state.live, state.in_use, state.percent, state.used
        busy = np.flatnonzero(in_use)
        energy = ""
        if self.energy:  # the counter of the raw samples only (records written directly hold no energy)
            self._joules += np.where(live, IDLE_WATTS + BUSY_WATTS * percent / 100.0, 0.0) * self.scale.resolution
            energy = _lines(self._energy[live], _objects(f"{j:.0f}" for j in self._joules[live]), ts)
        text = energy + "".join(
            (
                _lines(self._up[live], None, ts),
                _lines(self._total[live], None, ts),
                _lines(self._util[live], self._percent[percent[live]], ts),
                _lines(self._used[live], self._byte_texts(used[live]), ts),
                _lines(self._devices[on], None, ts),
                _lines(self._process[busy], self._byte_texts(used[busy] - IDLE_HBM_MIB), ts),
                _lines(self._pod[busy], None, ts),
            )
        )
        return text, (5 if self.energy else 4) * int(live.sum()) + int(on.sum()) + 2 * len(busy)

    def _start_jobs(self, job_of: np.ndarray) -> None:
        """The process and pod series of chips whose job changed."""
        for i in np.flatnonzero((job_of != self._job_of) & (job_of >= 0)).tolist():
            j, labels, node = int(job_of[i]), self._labels[i], i // self.scale.chips
            space = NAMESPACES[self.jobs.namespace[j]]
            self._process[i] = f'npu_process_memory_bytes{{{labels},pid="{self.pids[j]}",process="python3"}} '
            self._pod[i] = f'npu_pod_info{{{labels},namespace="{space}",pod="{space}-job{j:06d}-{node:04d}",container="trainer"}} 1'
            self.process_series += 1
        self._job_of = job_of

    def _byte_texts(self, mib: np.ndarray) -> np.ndarray:
        values, inverse = np.unique(mib, return_inverse=True)
        texts = np.empty(len(values), dtype=object)
        for k, v in enumerate(values.tolist()):
            text = self._bytes.get(v)
            if text is None:
                text = self._bytes[v] = str(v << 20)
            texts[k] = text
        return texts[inverse]

    def series_count(self) -> int:
        """Distinct series written so far (per chip: 4 always, 5 with energy, 2 per job it ran; per node: 1)."""
        per_chip = 5 if self.energy else 4
        return per_chip * self.scale.nodes * self.scale.chips + self.scale.nodes + 2 * self.process_series


def write_openmetrics(path: Path, parts: Iterator[tuple[str, int]]) -> WindowStats:
    """``(text, samples)`` parts, in order, into one OpenMetrics file (one block window)."""
    stats = WindowStats()
    with path.open("w", encoding="ascii", buffering=1 << 22) as out:
        for text, samples in parts:
            out.write(text)
            stats.samples += samples
            stats.bytes += len(text)
        out.write("# EOF\n")
    return stats


def _objects(items: Iterator[str]) -> np.ndarray:
    out = list(items)
    array = np.empty(len(out), dtype=object)
    array[:] = out
    return array


def _lines(prefixes: np.ndarray, values: np.ndarray | None, ts: str) -> str:
    """``prefix value ts`` lines (``prefix ts`` without values), joined in C."""
    if values is None:
        return ts.join(prefixes.tolist()) + ts if len(prefixes) else ""
    out = np.empty(3 * len(prefixes), dtype=object)
    out[0::3], out[1::3], out[2::3] = prefixes, values, ts
    return "".join(out.tolist())


def _instance(node: int) -> str:
    return f"npu-node-{node:04d}:9435"


def block_seconds(days: float) -> int:
    """The TSDB block length for the backfill: Prometheus' largest level below a tenth of a
    retention of twice the history (2 h x 3^k: 54 h for 30 days), so Prometheus only merges the
    backfilled blocks, never re-compacts them into longer ones."""
    retention = 2 * days * DAY
    size = 2 * HOUR
    while size * 3 <= retention / 10:
        size *= 3
    return size


def retention_days(days: float) -> int:
    return max(2, math.ceil(2 * days))
