"""Small JSON files of an export, loaded whole: communication.json, profiler_info*.json and
profiler_metadata.json.
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.profiles.formats.common import (
    Limits,
    ProfileParseError,
    as_int,
    json_object,
    read_small,
)
from exporter.profiles.formats.jsonstream import loads

# --- JSON: small files loaded whole -----------------------------------------------------------


@dataclass(frozen=True)
class CommunicationStep:
    """communication.json summed over the ops of one step ("communication.json"), microseconds."""

    step: int | None
    elapse_us: float
    transit_us: float
    wait_us: float
    synchronization_us: float


def read_communication(text: str, name: str = "communication.json") -> tuple[CommunicationStep, ...]:
    data = loads(text, name)
    if not isinstance(data, dict):
        raise ProfileParseError("malformed", f"{name}: expected a JSON object keyed by step")
    out = []
    for step_key, groups in data.items():
        if not isinstance(groups, dict):
            continue
        sums = [0.0, 0.0, 0.0, 0.0]
        for kind in ("collective", "p2p"):
            ops = groups.get(kind)
            for op_name, op in (ops.items() if isinstance(ops, dict) else ()):
                info = op.get("Communication Time Info") if isinstance(op, dict) and op_name != "Total Op Info" else None
                if isinstance(info, dict):
                    for i, key in enumerate(("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)")):
                        value = info.get(key)
                        if isinstance(value, (int, float)) and not isinstance(value, bool):
                            sums[i] += float(value) * 1000.0  # ms -> us ("Units")
        out.append(CommunicationStep(as_int(str(step_key).removeprefix("step")), *sums))
    return tuple(sorted(out, key=lambda s: (s.step is None, s.step or 0)))


@dataclass(frozen=True)
class ProfilerInfo:
    """profiler_info*.json ("profiler_info and profiler_metadata"): written when collection stops."""

    rank: int | None
    level: str | None
    collection_end: float | None      # unix seconds ("end_info.collectionTimeEnd" is ns)


def read_profiler_info(text: str, name: str = "profiler_info.json") -> ProfilerInfo:
    data = loads(text, name)
    if not isinstance(data, dict):
        raise ProfileParseError("malformed", f"{name}: expected a JSON object")
    experimental = json_object(json_object(data.get("config")).get("experimental_config"))
    end = json_object(data.get("end_info"))
    rank = as_int(data.get("rank_id"))
    end_ns = as_int(end.get("collectionTimeEnd"))
    level = experimental.get("_profiler_level")
    return ProfilerInfo(
        rank=rank if rank is not None and rank >= 0 else None,
        level=level if isinstance(level, str) else None,
        collection_end=end_ns / 1e9 if end_ns else None,
    )


_JOB_KEYS = ("job_name", "jobname", "job", "job_id", "model_name", "task_name")


def read_job_name(text: str, name: str = "profiler_metadata.json") -> str | None:
    """A job name the user stored with `prof.add_metadata(...)`, if any."""
    data = loads(text, name)
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in _JOB_KEYS:
        value = lowered.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def read_small_json(path: Path, reader: Callable[[str, str], Any], limits: Limits, max_bytes: int | None = None) -> Any:
    """``reader`` over the whole of ``path``, at most ``max_bytes`` (default ``limits.max_json_bytes``)."""
    text = read_small(path, limits.max_json_bytes if max_bytes is None else max_bytes, limits)
    if not text.strip():
        raise ProfileParseError("empty", f"{path.name}: empty file")
    return reader(text, path.name)


