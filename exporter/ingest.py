"""The training-hook event store behind `POST /api/v1/steps`.

`parse_batch` is pure: bytes in, a validated :class:`Batch` out, or an :class:`IngestError`
naming the problem and its reason. :class:`IngestStore` folds accepted batches into one
:class:`RankState` per (job_name, rank) without awaiting between the cardinality check and
the update; entries expire after a TTL so their series disappear from /metrics.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.errors import ReasonError
from exporter.metrics import JOB_DURATION_BUCKETS, JOB_PHASES

# Label values become Prometheus label values and dashboard variables: keep them plain.
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/+-]*")
_FRAMEWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_DEVICE = re.compile(r"[0-9]{1,5}")

_BATCH_FIELDS = frozenset({"job_name", "rank", "world_size", "device", "framework", "pid", "dropped", "final", "memory", "steps"})
_STEP_FIELDS = frozenset({"duration", "end", "samples", "phases"})
_MEMORY_FIELDS = frozenset({"allocated_bytes", "max_allocated_bytes"})
_PHASES = frozenset(JOB_PHASES)


@dataclass(frozen=True)
class IngestLimits:
    max_jobs: int = 64                    # distinct job_name values held at once
    max_ranks: int = 32                   # ranks held per job_name
    max_body_bytes: int = 1 << 20
    max_steps: int = 20_000               # steps in one batch
    max_step_seconds: float = 86_400.0    # a longer step or phase is a bug, not a measurement
    max_samples: int = 10**9              # per step
    max_label_length: int = 128
    max_world_size: int = 1 << 20
    max_memory_bytes: int = 1 << 50
    future_skew_seconds: float = 300.0    # step `end` later than now + this is rejected
    max_event_age_seconds: float = 86_400.0


class IngestError(ReasonError):
    """A rejected request: HTTP ``status``, a counter ``reason`` and a message for the client."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.status = status


@dataclass(frozen=True)
class Step:
    duration: float
    end: float | None                     # unix seconds; None: the time the batch arrived
    samples: int | None
    phases: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Batch:
    job_name: str
    rank: int
    world_size: int
    device: str                           # chip logic id, "" when unknown
    framework: str
    pid: str                              # "" when unknown
    dropped: int                          # steps the client dropped since its last accepted batch
    final: bool                           # the client closed: expire soon
    memory_allocated_bytes: int | None
    memory_max_allocated_bytes: int | None
    steps: tuple[Step, ...]


# --- validation (pure) -------------------------------------------------------------------

def _invalid(message: str) -> IngestError:
    return IngestError(400, "invalid", message)


def _out_of_range(message: str) -> IngestError:
    return IngestError(400, "out_of_range", message)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode_json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise IngestError(400, "malformed_json", "body is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise IngestError(400, "malformed_json", f"body is not valid JSON: {exc}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_float(value: float) -> float:
    """A JSON number as a float; an integer beyond float range is infinite, not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _int(value: Any, where: str, low: int, high: int) -> int:
    if not _is_int(value):
        raise _invalid(f"{where}: expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise _out_of_range(f"{where}: {value} is outside {low}..{high}")
    return value


def _seconds(value: Any, where: str, limit: float) -> float:
    if not _is_number(value):
        raise _invalid(f"{where}: expected a number of seconds, got {type(value).__name__}")
    seconds = _as_float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise _out_of_range(f"{where}: {value!r} is not a duration (must be >= 0)")
    if seconds > limit:
        raise _out_of_range(f"{where}: {value!r} s is longer than the {limit:g} s limit")
    return seconds


def _label(value: Any, where: str, pattern: re.Pattern[str], limits: IngestLimits) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where}: expected a string, got {type(value).__name__}")
    if len(value) > limits.max_label_length:
        raise IngestError(400, "bad_label", f"{where}: longer than {limits.max_label_length} characters")
    if not pattern.fullmatch(value):
        raise IngestError(400, "bad_label", f"{where}: {value[:40]!r} must match {pattern.pattern}")
    return value


def _unknown_fields(obj: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise _invalid(f"{where}: unknown field(s) {', '.join(map(repr, extra))}; expected {', '.join(sorted(allowed))}")


def _phases(value: Any, where: str, limits: IngestLimits) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, dict):
        raise _invalid(f"{where}: expected an object of phase name -> seconds")
    unknown = sorted(set(value) - _PHASES)
    if unknown:
        raise IngestError(400, "unknown_phase", f"{where}: unknown phase(s) {', '.join(map(repr, unknown))}; expected {', '.join(JOB_PHASES)}")
    return tuple((name, _seconds(seconds, f"{where}.{name}", limits.max_step_seconds)) for name, seconds in value.items())


def _step(raw: Any, where: str, limits: IngestLimits, now: float) -> Step:
    if not isinstance(raw, dict):
        raise _invalid(f"{where}: expected an object")
    _unknown_fields(raw, _STEP_FIELDS, where)
    if "duration" not in raw:
        raise _invalid(f"{where}: missing 'duration'")
    duration = _seconds(raw["duration"], f"{where}.duration", limits.max_step_seconds)
    end = raw.get("end")
    if end is not None:
        if not _is_number(end) or not math.isfinite(end := _as_float(end)):
            raise _invalid(f"{where}.end: expected unix seconds")
        if not now - limits.max_event_age_seconds <= end <= now + limits.future_skew_seconds:
            raise _out_of_range(f"{where}.end: {end!r} is not a recent unix time (server time {now:.0f})")
    samples = raw.get("samples")
    if samples is not None:
        samples = _int(samples, f"{where}.samples", 0, limits.max_samples)
    phases = _phases(raw["phases"], f"{where}.phases", limits) if raw.get("phases") is not None else ()
    return Step(duration, end, samples, phases)


def _memory(value: Any, limits: IngestLimits) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise _invalid("memory: expected an object")
    _unknown_fields(value, _MEMORY_FIELDS, "memory")
    out = []
    for key in ("allocated_bytes", "max_allocated_bytes"):
        raw = value.get(key)
        out.append(None if raw is None else _int(raw, f"memory.{key}", 0, limits.max_memory_bytes))
    return out[0], out[1]


def validate_batch(doc: Any, limits: IngestLimits, now: float) -> Batch:
    """A decoded JSON document -> Batch, or IngestError naming the first problem."""
    if not isinstance(doc, dict):
        raise _invalid("body: expected a JSON object")
    _unknown_fields(doc, _BATCH_FIELDS, "body")
    for key in ("job_name", "rank", "steps"):
        if key not in doc:
            raise _invalid(f"body: missing {key!r}")
    job_name = _label(doc["job_name"], "job_name", _JOB_NAME, limits)
    world_size = _int(doc.get("world_size", 1), "world_size", 1, limits.max_world_size)
    rank = _int(doc["rank"], "rank", 0, world_size - 1)
    device = doc.get("device")
    if _is_int(device):
        device = str(device)
    device = "" if device is None else _label(device, "device", _DEVICE, limits)
    framework = _label(doc.get("framework", "unknown"), "framework", _FRAMEWORK, limits)
    pid = doc.get("pid")
    pid = "" if pid is None else str(_int(pid, "pid", 1, 1 << 31))
    dropped = _int(doc.get("dropped", 0), "dropped", 0, 1 << 53)
    final = doc.get("final", False)
    if not isinstance(final, bool):
        raise _invalid("final: expected true or false")
    allocated, max_allocated = _memory(doc.get("memory"), limits)
    raw_steps = doc["steps"]
    if not isinstance(raw_steps, list):
        raise _invalid("steps: expected an array")
    if len(raw_steps) > limits.max_steps:
        raise _invalid(f"steps: {len(raw_steps)} steps in one batch; at most {limits.max_steps}")
    steps = tuple(_step(raw, f"steps[{i}]", limits, now) for i, raw in enumerate(raw_steps))
    return Batch(job_name, rank, world_size, device, framework, pid, dropped, final, allocated, max_allocated, steps)


def parse_batch(body: bytes, limits: IngestLimits, now: float) -> Batch:
    """Request body -> Batch (pure). Raises IngestError."""
    if len(body) > limits.max_body_bytes:
        raise IngestError(413, "too_large", f"body is {len(body)} bytes; at most {limits.max_body_bytes}")
    return validate_batch(decode_json(body), limits, now)


# --- state -------------------------------------------------------------------------------

@dataclass
class RankState:
    """Everything known about one (job_name, rank); counters only grow while it lives."""

    job_name: str
    rank: int
    world_size: int
    device: str
    framework: str
    pid: str
    last_seen: float                      # time.monotonic(): TTLs must not follow wall-clock jumps
    finished: bool = False
    iterations: int = 0
    samples: int | None = None            # None until a step reports samples
    duration_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(JOB_DURATION_BUCKETS) + 1))
    phase_seconds: dict[str, float] = field(default_factory=dict)
    last_iteration_end: float | None = None
    memory_allocated_bytes: int | None = None
    memory_max_allocated_bytes: int | None = None

    def fold(self, batch: Batch, now: float, seen: float) -> None:
        """``now`` is unix time (the default step end), ``seen`` the monotonic arrival time."""
        self.world_size, self.device, self.framework, self.pid = batch.world_size, batch.device, batch.framework, batch.pid
        self.last_seen = seen
        self.finished = batch.final
        if batch.memory_allocated_bytes is not None:
            self.memory_allocated_bytes = batch.memory_allocated_bytes
        if batch.memory_max_allocated_bytes is not None:
            self.memory_max_allocated_bytes = batch.memory_max_allocated_bytes
        for step in batch.steps:
            self.iterations += 1
            self.duration_sum += step.duration
            self.buckets[bisect.bisect_left(JOB_DURATION_BUCKETS, step.duration)] += 1
            if step.samples is not None:
                self.samples = (self.samples or 0) + step.samples
            for name, seconds in step.phases:
                self.phase_seconds[name] = self.phase_seconds.get(name, 0.0) + seconds
            end = now if step.end is None else step.end
            if self.last_iteration_end is None or end > self.last_iteration_end:
                self.last_iteration_end = end


@dataclass(frozen=True)
class RankView:
    """An immutable copy of a RankState for one scrape."""

    job_name: str
    rank: int
    world_size: int
    device: str
    framework: str
    pid: str
    iterations: int
    samples: int | None
    duration_sum: float
    cumulative_buckets: tuple[int, ...]   # per JOB_DURATION_BUCKETS bound, then +Inf
    phase_seconds: tuple[tuple[str, float], ...]
    last_iteration_end: float | None
    memory_allocated_bytes: int | None
    memory_max_allocated_bytes: int | None

    @classmethod
    def of(cls, s: RankState) -> RankView:
        cumulative, total = [], 0
        for count in s.buckets:
            total += count
            cumulative.append(total)
        return cls(
            s.job_name, s.rank, s.world_size, s.device, s.framework, s.pid, s.iterations, s.samples,
            s.duration_sum, tuple(cumulative), tuple(sorted(s.phase_seconds.items())), s.last_iteration_end,
            s.memory_allocated_bytes, s.memory_max_allocated_bytes,
        )


@dataclass(frozen=True)
class IngestCounters:
    requests: int
    steps: int
    client_dropped: int
    expired: int
    rejected: tuple[tuple[str, int], ...]
    ranks: int


class IngestStore:
    """Per-(job_name, rank) state. Callers run on the event loop; the lock only guards
    against a scrape from another thread, it is never held across an await."""

    def __init__(
        self,
        ttl: float = 1800.0,
        finished_ttl: float = 60.0,
        limits: IngestLimits = IngestLimits(),
        clock: Callable[[], float] = time.time,
        age_clock: Callable[[], float] | None = None,
    ) -> None:
        self.ttl = ttl
        self.finished_ttl = min(finished_ttl, ttl)
        self.limits = limits
        self.clock = clock    # unix time: step `end` checks and defaults
        # TTLs run on the monotonic clock; a test that injects only ``clock`` drives both.
        self.age_clock = age_clock or (time.monotonic if clock is time.time else clock)
        self._entries: dict[tuple[str, int], RankState] = {}
        self._ranks_per_job: dict[str, int] = {}
        self._lock = threading.Lock()
        self._requests = 0
        self._steps = 0
        self._client_dropped = 0
        self._expired = 0
        self._rejected: dict[str, int] = {}

    def accept(self, batch: Batch) -> int:
        """Fold a validated batch in; IngestError (429) when it would exceed a cardinality limit."""
        with self._lock:
            now, seen = self.clock(), self.age_clock()
            self._expire(seen)
            key = (batch.job_name, batch.rank)
            entry = self._entries.get(key)
            if entry is None:
                entry = self._admit(batch, seen)
            entry.fold(batch, now, seen)
            self._requests += 1
            self._steps += len(batch.steps)
            self._client_dropped += batch.dropped
            return len(batch.steps)

    def _admit(self, batch: Batch, now: float) -> RankState:
        ranks = self._ranks_per_job.get(batch.job_name, 0)
        if ranks == 0 and len(self._ranks_per_job) >= self.limits.max_jobs:
            raise IngestError(429, "too_many_jobs", f"already tracking {self.limits.max_jobs} jobs (ingest.max_jobs); {batch.job_name!r} is not admitted until one expires")
        if ranks >= self.limits.max_ranks:
            raise IngestError(429, "too_many_ranks", f"job {batch.job_name!r} already has {self.limits.max_ranks} ranks here (ingest.max_ranks)")
        entry = RankState(batch.job_name, batch.rank, batch.world_size, batch.device, batch.framework, batch.pid, now)
        self._entries[(batch.job_name, batch.rank)] = entry
        self._ranks_per_job[batch.job_name] = ranks + 1
        return entry

    def reject(self, reason: str) -> None:
        with self._lock:
            self._rejected[reason] = self._rejected.get(reason, 0) + 1

    def _expire(self, now: float) -> None:
        for key, entry in list(self._entries.items()):
            if now - entry.last_seen > (self.finished_ttl if entry.finished else self.ttl):
                del self._entries[key]
                left = self._ranks_per_job[entry.job_name] - 1
                if left:
                    self._ranks_per_job[entry.job_name] = left
                else:
                    del self._ranks_per_job[entry.job_name]
                self._expired += 1

    def view(self) -> tuple[tuple[RankView, ...], IngestCounters]:
        """Expire, then copy everything a scrape renders."""
        with self._lock:
            self._expire(self.age_clock())
            ranks = tuple(RankView.of(e) for _, e in sorted(self._entries.items()))
            counters = IngestCounters(
                self._requests, self._steps, self._client_dropped, self._expired,
                tuple(sorted(self._rejected.items())), len(self._entries),
            )
        return ranks, counters
