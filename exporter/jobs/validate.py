"""Validation of `POST /api/v1/steps` bodies (pure): bytes in, a validated :class:`Batch` out,
or an :class:`IngestError` naming the problem, its HTTP status and its counted reason.

Every value is bounded before it can reach the store: sizes, counts, label text, numbers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from exporter.core.errors import ReasonError
from exporter.jobs.liveness import PROC
from exporter.jobs.options import IngestOptions
from exporter.jobs.phases import word_of

# Label values become Prometheus label values and dashboard variables: keep them plain.
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/+-]*")
_FRAMEWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_DEVICE = re.compile(r"[0-9]{1,5}")
_SESSION = re.compile(r"[0-9a-f]{8,32}")
_MAX_PROCESS_SECONDS = 1e9  # a cumulative figure of one process: about 30 years

_BATCH_FIELDS = frozenset(
    {
        "job_name",
        "rank",
        "world_size",
        "device",
        "framework",
        "pid",
        "session",
        "dropped",
        "final",
        "memory",
        "profiling_seconds",
        "steps",
        "precision",
        "started",
        "proc",
        "outside",
    }
)
_STEP_FIELDS = frozenset({"duration", "end", "samples", "phases", "flops", "index"})
_OUTSIDE_FIELDS = frozenset({"end", "phases"})
MAX_INDEX = 1 << 53  # a step's training step number (JSON's exact integers)
PRECISIONS = ("fp32", "bf16", "fp16", "int8")  # a job's declared compute precision: which chip peak its MFU uses
_MEMORY_FIELDS = frozenset({"allocated_bytes", "max_allocated_bytes"})
# Phase names outside the vocabulary a batch reports back to its client (each at most 64 characters).
MAX_UNKNOWN_NAMES = 16
_MAX_UNKNOWN_NAME = 64


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
    phases: tuple[tuple[str, float], ...]  # vocabulary word (or "other") -> exclusive seconds
    flops: float | None = None  # the step's model FLOPs, when the hook declares them
    index: int | None = None  # the training step number it carried out (goodput.py: re-done work)


@dataclass(frozen=True)
class Outside:
    """Phases run outside any step (a checkpoint saved between steps), ending at ``end``."""

    end: float | None  # unix seconds; None: the time the batch arrived
    phases: tuple[tuple[str, float], ...]  # as a Step's; they last their sum


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
    session: str = ""  # the sending process's random id ("" when not sent): who holds the job_name and rank
    profiling_seconds: float | None = None  # the process's training-thread time in profiling windows so far
    unknown_phases: tuple[tuple[str, int], ...] = ()  # names outside the vocabulary (served as other) -> steps
    unknown_phase_entries: int = 0  # every such (step, name), also past MAX_UNKNOWN_NAMES
    started: float | None = None  # unix time the sending process started (its start-up: goodput.py)
    proc: str = ""  # the process as /proc shows it (liveness.py): "" when not sent
    outside: tuple[Outside, ...] = ()  # phases run between steps, oldest first


def _invalid(message: str) -> IngestError:
    return IngestError(400, "invalid", message)


def _out_of_range(message: str) -> IngestError:
    return IngestError(400, "out_of_range", message)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose names are unique: a name given twice (RFC 8259 leaves which one counts to
    the reader; Python keeps the last) is refused, never silently half-read."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"body is not valid JSON: the key {json.dumps(key[:64])} is given twice in one object")
            seen.add(key)
    return obj


def decode_json(body: bytes) -> Any:
    """The body as JSON: NaN, Infinity and an object naming a key twice are refused (malformed_json)."""
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise IngestError(400, "malformed_json", "body is not UTF-8 text") from None
    except _DuplicateKey as exc:
        raise IngestError(400, "malformed_json", str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise IngestError(400, "malformed_json", f"body is not valid JSON: {exc}") from None


def _is_int(value: Any) -> TypeGuard[int]:
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


@dataclass
class _Unknown:
    """Phase names outside the vocabulary in one batch: the first MAX_UNKNOWN_NAMES names -> steps, and every entry."""

    names: dict[str, int] = field(default_factory=dict)
    entries: int = 0


def _phases(value: Any, where: str, limits: IngestLimits, unknown: _Unknown) -> tuple[tuple[str, float], ...]:
    """Phase name -> seconds, names folded onto the vocabulary; a name outside it is served as
    `other` and counted in ``unknown``."""
    if not isinstance(value, dict):
        raise _invalid(f"{where}: expected an object of phase name -> seconds")
    out: dict[str, float] = {}
    for name, raw in value.items():
        seconds = _seconds(raw, f"{where}.{name[:40]}", limits.max_step_seconds)
        word = word_of(name)
        if word is None:
            word, key = "other", name[:_MAX_UNKNOWN_NAME]
            if key in unknown.names or len(unknown.names) < MAX_UNKNOWN_NAMES:
                unknown.names[key] = unknown.names.get(key, 0) + 1
            unknown.entries += 1
        out[word] = out.get(word, 0.0) + seconds
    return tuple(out.items())


def _end(end: Any, where: str, limits: IngestLimits, now: float) -> float | None:
    if end is None:
        return None
    if not _is_number(end) or not math.isfinite(end := _as_float(end)):
        raise _invalid(f"{where}: expected unix seconds")
    if not now - limits.max_event_age_seconds <= end <= now + limits.future_skew_seconds:
        raise _out_of_range(f"{where}: {end!r} is not a recent unix time (server time {now:.0f})")
    return float(end)


def _step(raw: Any, where: str, limits: IngestLimits, now: float, unknown: _Unknown) -> Step:
    if not isinstance(raw, dict):
        raise _invalid(f"{where}: expected an object")
    _unknown_fields(raw, _STEP_FIELDS, where)
    if "duration" not in raw:
        raise _invalid(f"{where}: missing 'duration'")
    duration = _seconds(raw["duration"], f"{where}.duration", limits.max_step_seconds)
    end = _end(raw.get("end"), f"{where}.end", limits, now)
    samples = raw.get("samples")
    if samples is not None:
        samples = _int(samples, f"{where}.samples", 0, limits.max_samples)
    phases = _phases(raw["phases"], f"{where}.phases", limits, unknown) if raw.get("phases") is not None else ()
    total = sum(seconds for _, seconds in phases)
    if total > duration * (1 + 1e-6) + 1e-6:  # float rounding aside
        raise _out_of_range(
            f"{where}.phases: add up to {total:.6g} s, more than the step's {duration:.6g} s (report each phase's exclusive time: "
            "a nested phase's time comes out of the enclosing one)"
        )
    flops = raw.get("flops")
    if flops is not None:
        if not _is_number(flops) or not math.isfinite(flops := _as_float(flops)) or not 0 < flops <= limits.max_flops:
            raise _out_of_range(f"{where}.flops: expected model FLOPs above 0 and at most {limits.max_flops:g}")
    index = raw.get("index")
    if index is not None:
        index = _int(index, f"{where}.index", 0, MAX_INDEX)
    return Step(duration, end, samples, phases, flops, index)


def _outside(raw: Any, where: str, limits: IngestLimits, now: float, unknown: _Unknown) -> Outside:
    if not isinstance(raw, dict):
        raise _invalid(f"{where}: expected an object")
    _unknown_fields(raw, _OUTSIDE_FIELDS, where)
    if not raw.get("phases"):
        raise _invalid(f"{where}: missing 'phases' (an object of phase name -> seconds)")
    phases = _phases(raw["phases"], f"{where}.phases", limits, unknown)
    if sum(seconds for _, seconds in phases) > limits.max_step_seconds:
        raise _out_of_range(f"{where}.phases: add up to more than the {limits.max_step_seconds:g} s limit")
    return Outside(_end(raw.get("end"), f"{where}.end", limits, now), phases)


def _started(value: Any, limits: IngestLimits, now: float) -> float | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(started := _as_float(value)):
        raise _invalid("started: expected unix seconds")
    if not 0 < started <= now + limits.future_skew_seconds:
        raise _out_of_range(f"started: {started!r} is not a unix time before now (server time {now:.0f})")
    return started


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
    session = doc.get("session")
    session = "" if session is None else _label(session, "session", _SESSION, limits)
    profiling = doc.get("profiling_seconds")
    profiling = None if profiling is None else _seconds(profiling, "profiling_seconds", _MAX_PROCESS_SECONDS)
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
    unknown = _Unknown()
    steps = tuple(_step(raw, f"steps[{i}]", limits, now, unknown) for i, raw in enumerate(raw_steps))
    raw_outside = doc.get("outside") or []
    if not isinstance(raw_outside, list):
        raise _invalid("outside: expected an array")
    if len(raw_outside) > limits.max_steps:
        raise _invalid(f"outside: {len(raw_outside)} entries in one batch; at most {limits.max_steps}")
    outside = tuple(_outside(raw, f"outside[{i}]", limits, now, unknown) for i, raw in enumerate(raw_outside))
    proc = doc.get("proc")
    proc = "" if proc is None else _label(proc, "proc", PROC, limits)
    precision = doc.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise _invalid(f"precision: expected one of {', '.join(PRECISIONS)}")
    return Batch(
        job_name,
        rank,
        world_size,
        device,
        framework,
        pid,
        dropped,
        final,
        allocated,
        max_allocated,
        steps,
        precision,
        session=session,
        profiling_seconds=profiling,
        unknown_phases=tuple(unknown.names.items()),
        unknown_phase_entries=unknown.entries,
        started=_started(doc.get("started"), limits, now),
        proc=proc,
        outside=outside,
    )


def parse_batch(body: bytes, limits: IngestLimits, now: float) -> Batch:
    """Request body -> Batch (pure). Raises IngestError."""
    if len(body) > limits.max_body_bytes:
        raise IngestError(413, "too_large", f"body is {len(body)} bytes; at most {limits.max_body_bytes}")
    return validate_batch(decode_json(body), limits, now)
