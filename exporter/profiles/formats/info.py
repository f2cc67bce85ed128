"""The JSON files of an export beside the timeline: communication.json (streamed op by op) and
profiler_info*.json and profiler_metadata.json (small, built whole under the same caps).
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.profiles.formats.budget import COMMUNICATION_STEP, MAX_NAME, Budget
from exporter.profiles.formats.common import (
    Limits,
    ProfileParseError,
    as_int,
    json_object,
    open_file,
)
from exporter.profiles.formats.jsonstream import (
    JsonCaps,
    Readable,
    as_handle,
    json_caps,
    json_items,
    load_document,
)
from exporter.profiles.formats.jsonstream import (
    Path as JsonPath,
)

Source = str | bytes | Readable  # a file's text, or the file
DEFAULT_CAPS = JsonCaps(file_values=Limits.max_json_values)


@dataclass(frozen=True)
class CommunicationStep:
    """communication.json summed over the ops of one step ("communication.json"), microseconds."""

    step: int | None
    elapse_us: float
    transit_us: float
    wait_us: float
    synchronization_us: float


MAX_COMMUNICATION_STEPS = 10_000  # steps summed at once (a real capture profiles a few dozen)
# Ops summed in one file: a real op holds its time and bandwidth info (50-100 values, 0.7-2 KB),
# so a file at its 64 MiB cap holds under 100,000. A file of tiny ops costs per op, not per byte.
MAX_COMMUNICATION_OPS = 200_000
_COMMUNICATION_KINDS = ("collective", "p2p")
_TIME_KEYS = ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)")


def read_communication(source: Source, name: str = "communication.json", caps: JsonCaps = DEFAULT_CAPS) -> tuple[CommunicationStep, ...]:
    """Per-step sums, streamed one op at a time: `{step: {collective|p2p: {op: {...}}}}`. Step
    keys are kept cut to MAX_NAME characters, each step charged to the export's memory allowance."""
    sums: dict[str, list[float]] = {}
    budget = caps.budget or Budget()

    def select(path: JsonPath, kind: str) -> bool | None:
        if not path:
            if kind != "map":
                raise ProfileParseError("malformed", f"{name}: expected a JSON object keyed by step")
            return None
        if len(path) == 1:
            if kind == "map" and str(path[0])[:MAX_NAME] not in sums:
                if len(sums) >= MAX_COMMUNICATION_STEPS:
                    raise ProfileParseError("too_many_objects", f"{name}: more than {MAX_COMMUNICATION_STEPS} steps")
                budget.hold(COMMUNICATION_STEP)
                sums[budget.name(str(path[0]))] = [0.0, 0.0, 0.0, 0.0]
            return None if kind == "map" else False
        if len(path) == 2:
            return None if kind == "map" and path[1] in _COMMUNICATION_KINDS else False
        return path[2] != "Total Op Info" and kind == "map"

    for ops, (path, op) in enumerate(json_items(as_handle(source), name, select, caps), start=1):
        if ops > MAX_COMMUNICATION_OPS:
            raise ProfileParseError("too_many_objects", f"{name}: more than {MAX_COMMUNICATION_OPS} communication ops")
        info = op.get("Communication Time Info")
        if isinstance(info, dict):
            step = sums[str(path[0])[:MAX_NAME]]
            for i, key in enumerate(_TIME_KEYS):
                value = info.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    step[i] += float(value) * 1000.0  # ms -> us ("Units")
    out = [CommunicationStep(as_int(key.removeprefix("step")), *values) for key, values in sums.items()]
    return tuple(sorted(out, key=lambda s: (s.step is None, s.step or 0)))


@dataclass(frozen=True)
class ProfilerInfo:
    """profiler_info*.json ("profiler_info and profiler_metadata"): written when collection stops."""

    rank: int | None
    level: str | None
    collection_end: float | None  # unix seconds ("end_info.collectionTimeEnd" is ns)


def read_profiler_info(source: Source, name: str = "profiler_info.json", caps: JsonCaps = DEFAULT_CAPS) -> ProfilerInfo:
    data = load_document(as_handle(source), name, caps)
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


def read_job_name(source: Source, name: str = "profiler_metadata.json", caps: JsonCaps = DEFAULT_CAPS) -> str | None:
    """A job name the user stored with `prof.add_metadata(...)`, if any (cut to MAX_NAME characters)."""
    data = load_document(as_handle(source), name, caps)
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in _JOB_KEYS:
        value = lowered.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()[:MAX_NAME]
    return None


def read_json_file(
    path: Path,
    reader: Callable[[Source, str, JsonCaps], Any],
    limits: Limits,
    max_bytes: int | None = None,
    whole: bool = False,
    budget: Budget | None = None,
) -> Any:
    """``reader`` streaming ``path`` (at most ``max_bytes``, default ``limits.max_json_bytes``);
    ``whole``: a small file built as one item (its size is then the item's bound). Its work and
    what the reader keeps are charged to ``budget`` (the export's)."""
    cap = limits.max_json_bytes if max_bytes is None else max_bytes
    caps = json_caps(limits, file_values=limits.max_json_values, item_bytes=cap if whole else None, budget=budget)
    with open_file(path, cap, limits) as handle:
        try:
            return reader(handle, path.name, caps)
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None
