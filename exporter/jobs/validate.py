"""Validation of `POST /api/v1/steps` bodies (pure): bytes in, a validated :class:`Batch` out,
or an :class:`IngestError` naming the problem, its HTTP status and its counted reason.

Every value is bounded before it can reach the store: sizes, counts, label text, numbers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exporter.core.errors import ReasonError
from exporter.jobs.metrics import JOB_PHASES
from exporter.jobs.options import IngestOptions

# Label values become Prometheus label values and dashboard variables: keep them plain.
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/+-]*")
_FRAMEWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_DEVICE = re.compile(r"[0-9]{1,5}")

_BATCH_FIELDS = frozenset(
    {"job_name", "rank", "world_size", "device", "framework", "pid", "dropped", "final", "memory", "steps", "precision"}
)
_STEP_FIELDS = frozenset({"duration", "end", "samples", "phases", "flops"})
PRECISIONS = ("fp32", "bf16", "fp16", "int8")  # a job's declared compute precision: which chip peak its MFU uses
_MEMORY_FIELDS = frozenset({"allocated_bytes", "max_allocated_bytes"})
_PHASES = frozenset(JOB_PHASES)


_DEFAULTS = IngestOptions()  # the option defaults, written once in options.py


@dataclass(frozen=True)
class IngestLimits:
    # Admission (store.py, admission.py): what the store may hold, and who gives way.
    max_jobs: int = _DEFAULTS.max_jobs
    max_ranks: int = _DEFAULTS.max_ranks  # per job_name
    max_series: int = _DEFAULTS.max_series  # SERIES_PER_RANK reserved per rank
    max_jobs_per_client: int = _DEFAULTS.max_jobs_per_client  # per remote address, loopback exempt
    max_ranks_per_client: int = _DEFAULTS.max_ranks_per_client
    idle_after: float = _DEFAULTS.idle_after  # seconds without a step before a rank may be evicted
    # The request and its values.
    max_body_bytes: int = _DEFAULTS.max_body_bytes
    max_steps: int = 20_000  # steps in one batch
    max_step_seconds: float = 86_400.0  # a longer step or phase is a bug, not a measurement
    max_samples: int = 10**9  # per step
    max_flops: float = 1e24  # model FLOPs of one step
    max_label_length: int = 128
    max_world_size: int = 1 << 20
    max_memory_bytes: int = 1 << 50
    future_skew_seconds: float = 300.0  # step `end` later than now + this is rejected
    max_event_age_seconds: float = 86_400.0

    @classmethod
    def of(cls, options: IngestOptions) -> IngestLimits:
        """The limits the `ingest.*` options set (the rest are fixed bounds)."""
        return cls(
            max_jobs=options.max_jobs,
            max_ranks=options.max_ranks,
            max_series=options.max_series,
            max_jobs_per_client=options.max_jobs_per_client,
            max_ranks_per_client=options.max_ranks_per_client,
            idle_after=options.idle_after,
            max_body_bytes=options.max_body_bytes,
        )


class IngestError(ReasonError):
    """A rejected request: HTTP ``status``, a counter ``reason`` and a message for the client."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(reason, message)
        self.status = status


@dataclass(frozen=True)
class Step:
    duration: float
    end: float | None  # unix seconds; None: the time the batch arrived
    samples: int | None
    phases: tuple[tuple[str, float], ...]
    flops: float | None = None  # the step's model FLOPs, when the hook declares them


@dataclass(frozen=True)
class Batch:
    job_name: str
    rank: int
    world_size: int
    device: str  # chip logic id, "" when unknown
    framework: str
    pid: str  # "" when unknown
    dropped: int  # steps the client dropped since its last accepted batch
    final: bool  # the client closed: expire soon
    memory_allocated_bytes: int | None
    memory_max_allocated_bytes: int | None
    steps: tuple[Step, ...]
    precision: str = "bf16"  # what the steps' FLOPs are computed in (one of PRECISIONS)


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
        raise IngestError(
            400, "unknown_phase", f"{where}: unknown phase(s) {', '.join(map(repr, unknown))}; expected {', '.join(JOB_PHASES)}"
        )
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
    flops = raw.get("flops")
    if flops is not None:
        if not _is_number(flops) or not math.isfinite(flops := _as_float(flops)) or not 0 < flops <= limits.max_flops:
            raise _out_of_range(f"{where}.flops: expected model FLOPs above 0 and at most {limits.max_flops:g}")
    return Step(duration, end, samples, phases, flops)


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
    precision = doc.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise _invalid(f"precision: expected one of {', '.join(PRECISIONS)}")
    return Batch(job_name, rank, world_size, device, framework, pid, dropped, final, allocated, max_allocated, steps, precision)


def parse_batch(body: bytes, limits: IngestLimits, now: float) -> Batch:
    """Request body -> Batch (pure). Raises IngestError."""
    if len(body) > limits.max_body_bytes:
        raise IngestError(413, "too_large", f"body is {len(body)} bytes; at most {limits.max_body_bytes}")
    return validate_batch(decode_json(body), limits, now)
