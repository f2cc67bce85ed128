"""Validation of `POST /api/v1/profiles` bodies (pure): the summary of one profiling window of
the hooks, bytes in, a ProfileSummary out, or an :class:`IngestError` naming the problem.

The same rules as the steps batches (validate.py): the same label character sets and
lengths, unknown fields refused, every number bounded. A share is a finite number in 0..1,
the operator shares of one summary add up to at most 1, and at most ``MAX_OPERATORS``
operator types come in (the exporter serves its `profiles.top_k` largest).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from exporter.jobs.validate import (
    _FRAMEWORK,
    _JOB_NAME,
    IngestError,
    IngestLimits,
    _as_float,
    _int,
    _invalid,
    _is_number,
    _label,
    _out_of_range,
    _seconds,
    _unknown_fields,
    decode_json,
)
from exporter.profiles.indicators import OperatorShare, ProfileSummary
from exporter.profiles.window import BACKENDS, RATIOS  # the document's producer

MEMCPY_KINDS = ("h2d", "d2h", "d2d", "h2d_d2h", "other")
MAX_OPERATORS = 32
# Operator names as profilers write them: `MatMulV2`, `aten::mm`, `hcom_allReduce_`, CUDA
# kernels like `void gemm<float, 128>(...)`; no quotes, backslashes, braces or control characters.
_OP_TYPE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@/+<>,()\[\]#=*& -]*")
_FIELDS = frozenset(
    {
        "job_name",
        "rank",
        "world_size",
        "framework",
        "pid",
        "backend",
        "finished_at",
        "steps",
        "skipped",
        "step_duration_seconds",
        "memcpy_kind_ratios",
        "operators",
        *RATIOS,
    }
)
_OPERATOR_FIELDS = frozenset({"op_type", "ratio", "seconds", "count"})
_SLACK = 1e-6  # float sums of shares


@dataclass(frozen=True)
class PostedProfile:
    summary: ProfileSummary
    backend: str
    skipped: int  # windows the client skipped since its last accepted summary


def _ratio(value: Any, where: str) -> float:
    if not _is_number(value):
        raise _invalid(f"{where}: expected a number, got {type(value).__name__}")
    ratio = _as_float(value)
    if not math.isfinite(ratio) or not 0.0 <= ratio <= 1.0:
        raise _out_of_range(f"{where}: {value!r} is not a share (0..1)")
    return ratio


def _operators(value: Any, limits: IngestLimits) -> tuple[OperatorShare, ...]:
    if not isinstance(value, list):
        raise _invalid("operators: expected an array")
    if len(value) > MAX_OPERATORS:
        raise _invalid(f"operators: {len(value)} operator types; at most {MAX_OPERATORS}")
    out, seen = [], set()
    for i, raw in enumerate(value):
        where = f"operators[{i}]"
        if not isinstance(raw, dict):
            raise _invalid(f"{where}: expected an object")
        _unknown_fields(raw, _OPERATOR_FIELDS, where)
        if "op_type" not in raw or "ratio" not in raw:
            raise _invalid(f"{where}: missing 'op_type' or 'ratio'")
        op_type = _label(raw["op_type"], f"{where}.op_type", _OP_TYPE, limits)
        if op_type in seen:
            raise _invalid(f"{where}.op_type: {op_type!r} appears twice")
        seen.add(op_type)
        seconds = _seconds(raw.get("seconds", 0.0), f"{where}.seconds", limits.max_step_seconds * 1000)
        count = _int(raw.get("count", 0), f"{where}.count", 0, 1 << 53)
        out.append(OperatorShare(op_type, seconds * 1e6, count, _ratio(raw["ratio"], f"{where}.ratio")))
    if sum(o.ratio for o in out) > 1.0 + _SLACK:
        raise _out_of_range("operators: the shares add up to more than 1")
    return tuple(sorted(out, key=lambda o: (-o.ratio, o.op_type)))


def _memcpy_kinds(value: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, dict):
        raise _invalid("memcpy_kind_ratios: expected an object of kind -> share")
    unknown = sorted(set(value) - set(MEMCPY_KINDS))
    if unknown:
        raise _invalid(f"memcpy_kind_ratios: unknown kind(s) {', '.join(map(repr, unknown))}; expected {', '.join(MEMCPY_KINDS)}")
    return tuple(sorted((kind, _ratio(share, f"memcpy_kind_ratios.{kind}")) for kind, share in value.items()))


def validate_profile(doc: Any, limits: IngestLimits, now: float) -> PostedProfile:
    """A decoded JSON document -> PostedProfile, or IngestError naming the first problem."""
    if not isinstance(doc, dict):
        raise _invalid("body: expected a JSON object")
    _unknown_fields(doc, _FIELDS, "body")
    for key in ("job_name", "rank", "backend", "finished_at"):
        if key not in doc:
            raise _invalid(f"body: missing {key!r}")
    job_name = _label(doc["job_name"], "job_name", _JOB_NAME, limits)
    world_size = _int(doc.get("world_size", 1), "world_size", 1, limits.max_world_size)
    rank = _int(doc["rank"], "rank", 0, world_size - 1)
    _label(doc.get("framework", "unknown"), "framework", _FRAMEWORK, limits)
    if doc.get("pid") is not None:
        _int(doc["pid"], "pid", 1, 1 << 31)
    backend = doc["backend"]
    if backend not in BACKENDS:
        raise _invalid(f"backend: expected one of {', '.join(BACKENDS)}")
    finished = doc["finished_at"]
    if not _is_number(finished) or not math.isfinite(finished := _as_float(finished)):
        raise _invalid("finished_at: expected unix seconds")
    if not now - limits.max_event_age_seconds <= finished <= now + limits.future_skew_seconds:
        raise _out_of_range(f"finished_at: {finished!r} is not a recent unix time (server time {now:.0f})")
    steps = _int(doc.get("steps", 0), "steps", 0, 1 << 31)
    skipped = _int(doc.get("skipped", 0), "skipped", 0, 1 << 31)
    duration = doc.get("step_duration_seconds")
    ratios = {name: _ratio(doc[name], name) for name in RATIOS if doc.get(name) is not None}
    operators = _operators(doc["operators"], limits) if doc.get("operators") is not None else ()
    if operators and "max_operator_ratio" in ratios and ratios["max_operator_ratio"] < operators[0].ratio - _SLACK:
        raise _out_of_range("max_operator_ratio: smaller than the largest operator share")
    if ratios.get("max_operator_ratio", 0.0) > ratios.get("top3_operator_ratio", 1.0) + _SLACK:
        raise _out_of_range("max_operator_ratio: larger than top3_operator_ratio")
    summary = ProfileSummary(
        job_name=job_name,
        rank=rank,
        path=f"posted:{job_name}/{rank}",
        producer="hooks",
        step_count=steps,
        finished_at=finished,
        step_duration_seconds=None if duration is None else _seconds(duration, "step_duration_seconds", limits.max_step_seconds),
        memcpy_kind_ratios=_memcpy_kinds(doc["memcpy_kind_ratios"]) if doc.get("memcpy_kind_ratios") is not None else (),
        top_operators=operators,
        compute_ratio=ratios.get("compute_ratio"),
        communication_ratio=ratios.get("communication_ratio"),
        idle_ratio=ratios.get("idle_ratio"),
        memcpy_ratio=ratios.get("memcpy_ratio"),
        framework_overhead_ratio=ratios.get("framework_overhead_ratio"),
        top3_operator_ratio=ratios.get("top3_operator_ratio"),
        max_operator_ratio=ratios.get("max_operator_ratio"),
    )
    return PostedProfile(summary, backend, skipped)


def parse_profile(body: bytes, limits: IngestLimits, now: float) -> PostedProfile:
    """Request body -> PostedProfile (pure). Raises IngestError."""
    if len(body) > limits.max_body_bytes:
        raise IngestError(413, "too_large", f"body is {len(body)} bytes; at most {limits.max_body_bytes}")
    return validate_profile(decode_json(body), limits, now)
