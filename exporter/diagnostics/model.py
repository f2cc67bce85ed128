"""What the readers produce and the analysis consumes: plain frozen records, no I/O.

Ratios are 0..1, times in seconds. ``None`` means "not known from this source", never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from exporter.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from exporter.jobs.phases import stage_of
from exporter.profiles.indicators import ProfileSummary
from exporter.thresholds.table import ABNORMAL, HEALTHY, WARNING

HARDWARE, MACRO, MESO, MICRO, BASELINE = "hardware", "macro", "meso", "micro", "baseline"
LEVELS = (HARDWARE, MACRO, MESO, MICRO, BASELINE)
LEVEL_TITLES = {
    HARDWARE: "Hardware: is the chip sound?",
    MACRO: "Macro: is the task stream continuous?",
    MESO: "Meso: where does the step time go?",
    MICRO: "Micro: which operators?",
    BASELINE: "Baseline: faster or slower than before?",
}
RATIO, SECONDS, PER_SECOND, PAGES, COUNT = "ratio", "seconds", "per_second", "pages", "count"
_RANK = {None: 0, HEALTHY: 1, WARNING: 2, ABNORMAL: 3}

# diagnose's verdict as its exit status
EXIT_HEALTHY, EXIT_ABNORMAL, EXIT_CANNOT = EXIT_OK, EXIT_FAILURE, EXIT_USAGE


class CannotDiagnose(Exception):
    """The input cannot be diagnosed (unreachable, empty, missing series, bad file): exit 2.

    The message names what is missing; it is shown as is, without a traceback.
    """


def chip_subject(instance: str, npu: str, chip: str, device: str) -> str:
    where = f"{instance} " if instance else ""
    return f"{where}NPU {npu} chip {chip} (device {device or '?'})"


@dataclass(frozen=True)
class PageCount:
    """Isolated pages of one memory (hbm, ddr) after one error type (single_bit, double_bit)."""

    memory: str
    type: str
    pages: float


@dataclass(frozen=True)
class ChipStats:
    """AI Core utilization of one chip over the window (one sample: that sample)."""

    instance: str  # Prometheus target ("" for one exporter or the local node)
    npu: str
    chip: str
    device: str
    mean: float
    minimum: float | None = None
    maximum: float | None = None
    stddev: float | None = None  # swing: stddev over the unstable alert's range, averaged
    samples: int = 1
    in_use: bool = True  # a process, pod or training job is on the chip
    isolated_pages: tuple[PageCount, ...] = ()  # at the end of the window; () when the chip reports none
    new_isolated_pages: float | None = None  # isolated within the window (None: one reading)

    @property
    def subject(self) -> str:
        return chip_subject(self.instance, self.npu, self.chip, self.device)


@dataclass(frozen=True)
class JobStats:
    """One training process (job_name, rank) reporting through the hooks."""

    instance: str
    job_name: str
    rank: str
    iteration_seconds: float | None = None  # mean iteration time
    iterations_per_second: float | None = None
    samples_per_second: float | None = None
    busy_ratio: float | None = None  # share of wall time spent inside iterations
    phase_shares: tuple[tuple[str, float], ...] = ()  # share of iteration time per reported phase
    seconds_since_last_iteration: float | None = None
    lifetime: float | None = None  # seconds it reported within the window (None: unknown)
    window: float | None = None  # the window's length, when it was judged over one
    device: str | None = None  # chip logic id from npu_job_info; "": no chip (a CPU job); None: unknown
    mfu: float | None = None  # model FLOPs utilization (npu_job_model_flops_utilization_ratio); None: not served
    goodput: float | None = None  # share of its wall time (goodput + badput) in steps that moved training forward
    badput: tuple[tuple[str, float], ...] = ()  # (kind, share of the same wall time)

    @property
    def subject(self) -> str:
        where = f" on {self.instance}" if self.instance else ""
        return f"job {self.job_name} rank {self.rank or '?'}{where}"

    def phase(self, stage: str) -> float | None:
        """Share of the step in ``stage``, whatever words the loop gave its phases (forward and
        backward are both compute); None when no phase of that stage was reported."""
        found = [share for word, share in self.phase_shares if stage_of(word) == stage]
        return sum(found) if found else None


Labels = Mapping[str, str]
Series = tuple[Labels, float]


@dataclass(frozen=True)
class Gap:
    """A stretch of the window without the exporter's samples."""

    instance: str
    start: float  # unix seconds
    seconds: float
    trailing: bool = False


@dataclass(frozen=True)
class HardwareReadings:
    """Hardware facts from any reader: latest values and counter increases by metric name, with labels."""

    latest: Mapping[str, tuple[Series, ...]] = field(default_factory=dict)
    increases: Mapping[str, tuple[Series, ...]] = field(default_factory=dict)  # empty: one reading
    seconds: float | None = None  # time the increases cover
    gaps: tuple[Gap, ...] = ()

    def get(self, name: str) -> tuple[Series, ...]:
        return self.latest.get(name, ())

    @property
    def empty(self) -> bool:
        return not any(self.latest.values())


@dataclass(frozen=True)
class Observations:
    """Everything one input told us, whatever the input was."""

    source: str  # e.g. "Prometheus http://..:9090"
    window: str | None = None  # e.g. "1h ending 2026-01-02 10:00 UTC"; None: one moment
    chips: tuple[ChipStats, ...] = ()
    jobs: tuple[JobStats, ...] = ()
    profiles: tuple[ProfileSummary, ...] = ()
    notes: tuple[str, ...] = ()  # partial problems worth telling (not fatal)
    hardware: HardwareReadings = field(default_factory=lambda: HardwareReadings())

    @property
    def empty(self) -> bool:
        return not (self.chips or self.jobs or self.profiles)


@dataclass(frozen=True)
class Finding:
    """One indicator of one subject (a chip, a job rank, a profile), judged or informational."""

    level: str  # macro, meso, micro, baseline
    check: str  # machine-readable kind, e.g. utilization, stability, phase.data
    title: str  # human title, e.g. "Device utilization"
    subject: str  # e.g. "node-a:9435 NPU 1 chip 0 (device 1)"
    value: float | None
    unit: str = RATIO  # ratio, seconds, per_second
    verdict: str | None = None  # healthy / warning / abnormal; None: informational
    indicator: str | None = None  # threshold-table row: bounds, causes, levers
    alert: str | None = None  # the contract alert that watches the same thing live
    bounds: str = ""  # e.g. "healthy > 85%, abnormal < 60%"
    detail: str = ""

    @property
    def judged(self) -> bool:
        return self.verdict is not None


@dataclass(frozen=True)
class Report:
    source: str
    window: str | None
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)  # e.g. the baseline file written

    @property
    def verdict(self) -> str:
        return worst(f.verdict for f in self.findings) or HEALTHY

    @property
    def exit_code(self) -> int:
        return EXIT_ABNORMAL if self.verdict == ABNORMAL else EXIT_HEALTHY

    def at(self, level: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == level)

    def counts(self) -> dict[str, int]:
        out = {HEALTHY: 0, WARNING: 0, ABNORMAL: 0}
        for f in self.findings:
            if f.verdict in out:
                out[f.verdict] += 1
        return out


def worst(verdicts: Iterable[str | None]) -> str | None:
    """The most severe of the verdicts (None when none was judged)."""
    best: str | None = None
    for v in verdicts:
        if _RANK.get(v, 0) > _RANK.get(best, 0):
            best = v
    return best
