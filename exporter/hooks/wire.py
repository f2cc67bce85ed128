"""One training step as the ingest API's step object (POST /api/v1/steps).

The exporter rejects a whole batch for one value outside its limits, so the sender checks
each step against the same limits here and drops (and counts) only that step.
"""

from __future__ import annotations

import math
from typing import Any

# The stages of a step; the exporter also understands the words loops write for them
# (forward, all_reduce, dataloader, ...) and maps them itself: the hook sends names as given.
PHASES = ("data", "h2d", "compute", "communication", "d2h", "framework", "other")
MAX_PHASE_NAME = 128  # characters of a phase name sent
MAX_PHASE_NAMES = 64  # distinct names one monitor sends; beyond, "other"
_MAX_SECONDS = 86_400.0  # longer steps/phases are absurd
_MAX_SAMPLES = 10**9
_MAX_END_AGE = 86_000.0  # an `end` older than about a day, or more than
_MAX_END_AHEAD = 290.0  # ~5 minutes ahead, is replaced by the recording time
MAX_FLOPS = 1e24  # model FLOPs of one step: far above any step of any model today
MAX_INDEX = 1 << 53  # a step's training step number (JSON's exact integers)
PRECISIONS = ("fp32", "bf16", "fp16", "int8")  # what a job may declare it computes in (MFU's peak)

# One buffered step: (end perf_counter, duration seconds, samples, {phase: seconds});
# record_step(end=...) appends the caller's unix end time, sent as given; step(flops=F)
# appends (None, F), the step's own model FLOPs; step(index=N) appends (end or None, flops or
# None, N), the training step it carried out. Phases run outside any step are buffered as
# (end perf_counter, seconds, OUTSIDE, {phase: seconds}[, unix end]). Values are as the loop
# gave them (Any): step_json and outside_json check them on the sender thread.
Event = (
    tuple[float, Any, Any, dict[Any, Any]]
    | tuple[float, Any, Any, dict[Any, Any], float | None]
    | tuple[float, Any, Any, dict[Any, Any], None, Any]
    | tuple[float, Any, Any, dict[Any, Any], float | None, Any, Any]
)
OUTSIDE: Any = object()  # the samples slot of an event that is phases run outside any step


def count_value(value: Any, limit: int = _MAX_SAMPLES) -> int | None:
    """A non-negative integer count from an int-like value, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None
    try:
        number = value.__index__() if value is not None else None
    except Exception:
        return None
    return number if number is not None and 0 <= number <= limit else None


def seconds_value(value: Any) -> float | None:
    try:
        seconds = float(value)
    except Exception:
        return None
    return seconds if math.isfinite(seconds) and 0.0 <= seconds <= _MAX_SECONDS else None


def flops_value(value: Any) -> float | None:
    """Model FLOPs of a step: a positive finite number up to MAX_FLOPS, else None."""
    if isinstance(value, bool):
        return None
    try:
        flops = float(value)
    except Exception:
        return None
    return flops if 0.0 < flops <= MAX_FLOPS else None


def step_json(event: Event, offset: float, flops_per_step: float | None = None) -> dict[str, Any] | None:
    """One buffered event as the API's step object; None when its duration is unusable.
    ``flops_per_step`` is the monitor's declared model FLOPs, for steps that carry none.

    Plain floats and ints take the fast path (this runs for every step on the sender thread).
    """
    duration = event[1]
    if type(duration) is not float or not 0.0 <= duration <= _MAX_SECONDS:  # NaN fails too
        duration = seconds_value(duration)
        if duration is None:
            return None
    step: dict[str, Any] = {"end": _end(event, offset), "duration": duration}
    samples = event[2]
    if samples is not None:
        if type(samples) is not int or not 0 <= samples <= _MAX_SAMPLES:
            samples = count_value(samples)
        if samples is not None:
            step["samples"] = samples
    phases = event[3]
    if phases:
        clean: dict[str, float] = {}
        for name, value in phases.items():
            if type(value) is not float or not 0.0 <= value <= _MAX_SECONDS:
                value = seconds_value(value)
                if value is None:
                    continue
            if type(name) is not str:  # record_step(phases={1: ...}): the JSON needs text
                name = "other"
            elif len(name) > MAX_PHASE_NAME:
                name = name[:MAX_PHASE_NAME]
            clean[name] = clean[name] + value if name in clean else value
        if clean:
            total = sum(clean.values())
            if total > duration:  # overlapping phases (threads, hand-timed): never more than the step
                scale = duration / total
                clean = {name: value * scale for name, value in clean.items()}
            step["phases"] = clean
    own = event[5] if len(event) > 5 else None
    flops = flops_value(own) if own is not None else flops_per_step
    if flops is not None:
        step["flops"] = flops
    if len(event) > 6:
        index = event[6]
        if type(index) is not int or not 0 <= index <= MAX_INDEX:
            index = count_value(index, MAX_INDEX)
        if index is not None:
            step["index"] = index
    return step


def _end(event: Event, offset: float) -> float:
    """The event's unix end: its perf_counter end on the wall clock, or the caller's own if plausible."""
    end = round(event[0] + offset, 6)
    if len(event) > 4 and event[4] is not None and end - _MAX_END_AGE <= event[4] <= end + _MAX_END_AHEAD:
        return event[4]
    return end


def outside_json(event: Event, offset: float) -> dict[str, Any] | None:
    """Phases run outside any step as the API's outside object; None when none is usable."""
    clean: dict[str, float] = {}
    for name, value in event[3].items():
        seconds = seconds_value(value)
        if seconds is None:
            continue
        name = name[:MAX_PHASE_NAME] if type(name) is str else "other"
        clean[name] = clean.get(name, 0.0) + seconds
    if not clean or sum(clean.values()) > _MAX_SECONDS:
        return None
    return {"end": _end(event, offset), "phases": clean}


def exclusive(spans: list[tuple[str, float, float]]) -> dict[str, float]:
    """Self time per name from (name, start, end) spans: a span's time minus the time of the
    spans nested in it (partly overlapping ones count their overlap), as profilers count."""
    out: dict[str, float] = {}
    open_: list[tuple[float, str]] = []  # (end, name) of the enclosing spans, innermost last
    for name, start, end in sorted(spans, key=lambda s: (s[1], -s[2])):
        while open_ and open_[-1][0] <= start:
            open_.pop()
        out[name] = out.get(name, 0.0) + (end - start)
        if open_:
            outer_end, outer = open_[-1]
            out[outer] -= min(end, outer_end) - start
        open_.append((end, name))
    return {name: max(0.0, seconds) for name, seconds in out.items()}
