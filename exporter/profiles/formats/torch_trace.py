"""torch.profiler's Chrome trace (Kineto's `export_chrome_trace` JSON), streamed event by event:
the `ProfilerStep#N` spans, the self time of every CPU operator, and on CUDA the device
kernels (by the operator that launched them), copies and sets.
Quoted section names refer to docs/formats/profiler-exports.md ("torch.profiler traces").

Memory grows with the number of events by about 20 bytes each (compact arrays per thread and
for device work), never with the text: the file is read in chunks and each event decoded on
its own. Names are kept cut and interned, and every event kept and name counts against the
memory allowance (formats/budget.py). A trace written as `{"traceEvents": [...]}` (Kineto's layout) is streamed too.
"""

from __future__ import annotations

import math
import os
import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from exporter.core.inputfile import InputRefused, open_input
from exporter.profiles.formats.budget import DEVICE_EVENT, MAX_NAME, Budget
from exporter.profiles.formats.common import (
    Issue,
    Limits,
    ProfileParseError,
    as_int,
    json_object,
)
from exporter.profiles.formats.jsonstream import Readable, event_span, json_caps
from exporter.profiles.formats.jsonstream import trace_events as json_trace_events
from exporter.profiles.formats.tables import OpTypeTime, merge_op_types
from exporter.profiles.formats.trace import CAP_REASONS, HostStep

# Host operator spans, and spans that only nest them (record_function, Python frames).
_CPU_OP = "cpu_op"
_CONTAINERS = frozenset({"user_annotation", "python_function"})
_KERNEL, _MEMCPY, _MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
_COPY_KINDS = (("htod", "h2d"), ("dtoh", "d2h"), ("dtod", "d2d"))
_COMMUNICATION = re.compile(r"^nccl|^ncclDevKernel|^ncclKernel", re.IGNORECASE)


@dataclass(frozen=True)
class DeviceStep:
    """Device time of one host step (CUDA), microseconds: kernels not overlapped etc."""

    step: int
    span_us: float  # the host step's duration
    computing_us: float  # union of compute kernels
    communication_not_overlapped_us: float  # NCCL kernels not hidden under compute
    busy_us: float  # union of compute and communication kernels (copies count as Free, as on the NPU)


@dataclass(frozen=True)
class TorchTrace:
    host_steps: tuple[HostStep, ...]
    cpu_ops: tuple[OpTypeTime, ...]  # self time per operator name, largest first
    kernels: tuple[OpTypeTime, ...] = ()  # device kernel time per launching operator (CUDA)
    communication_us: float = 0.0  # NCCL kernel time (excluded from operator shares)
    memcpy: tuple[tuple[float, float, str], ...] = ()  # (start, duration, kind) of device copies
    device_steps: tuple[DeviceStep, ...] = ()
    events: int = 0
    issues: tuple[Issue, ...] = ()

    @property
    def has_device(self) -> bool:
        return bool(self.kernels or self.memcpy or self.communication_us)


class _Thread:
    """One host thread's spans, compact: start, duration, name id (-1: a container span)."""

    __slots__ = ("start", "duration", "name")

    def __init__(self) -> None:
        self.start, self.duration, self.name = array("d"), array("d"), array("i")


class _Acc:
    def __init__(self, limits: Limits, budget: Budget) -> None:
        self.limits, self.budget = limits, budget
        self.names: dict[str, int] = {}
        self.threads: dict[tuple[Any, Any], _Thread] = {}
        self.steps: list[HostStep] = []
        # device work: start, end, kind (0 compute kernel, 1 communication kernel, 2 copy, 3 set)
        self.dev_start, self.dev_end, self.dev_kind = array("d"), array("d"), array("b")
        self.kernel_ext, self.kernel_name = array("q"), array("i")
        self.kernel_us = array("d")
        self.copies: list[tuple[float, float, str]] = []
        self.events = self.bad = self.dropped = 0

    def name_id(self, name: str) -> int:
        name = name[:MAX_NAME]  # cut before it is compared: equal cut names are one
        found = self.names.get(name)
        if found is None:
            found = self.names[self.budget.name(name)] = len(self.names)
        return found

    def add(self, event: Any) -> None:
        self.events += 1
        if self.events > self.limits.max_trace_events:
            raise ProfileParseError("too_many_events", f"more than {self.limits.max_trace_events} trace events")
        if not isinstance(event, dict) or event.get("ph") != "X":
            return
        name, category = event.get("name"), event.get("cat")
        if not isinstance(name, str) or not isinstance(category, str):
            return
        span = event_span(event)
        if span is None:
            self.bad += 1
            return
        start, duration = span
        if category == _CPU_OP or category in _CONTAINERS:
            self._host(event, category, name, start, duration)
        elif category in (_KERNEL, _MEMCPY, _MEMSET):
            self._device(event, category, name, start, duration)

    def _host(self, event: dict[str, Any], category: str, name: str, start: float, duration: float) -> None:
        if category == "user_annotation" and name.startswith("ProfilerStep#"):
            step = as_int(name.removeprefix("ProfilerStep#"))
            if step is not None:
                self.steps.append(HostStep(step, start, duration))
        key = (event.get("pid"), event.get("tid"))
        thread = self.threads.get(key)
        if thread is None:
            try:
                thread = self.threads[key] = _Thread()
            except TypeError:  # an unhashable pid/tid
                self.bad += 1
                return
        self.budget.hold(DEVICE_EVENT)
        thread.start.append(start)
        thread.duration.append(duration)
        thread.name.append(self.name_id(name) if category == _CPU_OP else -1)

    def _device(self, event: dict[str, Any], category: str, name: str, start: float, duration: float) -> None:
        if len(self.dev_start) >= self.limits.max_memcpy_events:
            self.dropped += 1
            return
        self.budget.hold(DEVICE_EVENT)
        if category == _KERNEL:
            kind = 1 if _COMMUNICATION.match(name) else 0
            if kind == 0:
                ext = as_int(json_object(event.get("args")).get("External id"))
                self.kernel_ext.append(ext if ext is not None and 0 <= ext < 1 << 62 else -1)
                self.kernel_name.append(self.name_id(name))
                self.kernel_us.append(duration)
        else:
            kind = 2 if category == _MEMCPY else 3
            if kind == 2:
                self.copies.append((start, duration, copy_kind(name)))
        self.dev_start.append(start)
        self.dev_end.append(start + duration)
        self.dev_kind.append(kind)


def copy_kind(name: str) -> str:
    """`Memcpy HtoD (Pageable -> Device)` -> h2d; DtoH -> d2h; DtoD -> d2d; else other."""
    lowered = name.lower()
    return next((kind for marker, kind in _COPY_KINDS if marker in lowered), "other")


def _self_times(acc: _Acc) -> dict[int, list[float]]:
    """name id -> [self time, count, longest]: each span minus its direct children, per thread."""
    totals: dict[int, list[float]] = {}
    for thread in acc.threads.values():
        order: Any = range(len(thread.start))
        starts = thread.start
        if any(starts[i] > starts[i + 1] for i in range(len(starts) - 1)):  # Kineto writes start order
            order = sorted(order, key=lambda i: (starts[i], -thread.duration[i]))
        stack: list[list[float]] = []  # [end, name id, duration, children]
        for i in order:
            start, duration = starts[i], thread.duration[i]
            while stack and start >= stack[-1][0]:
                _close(stack.pop(), totals)
            if stack:
                stack[-1][3] += duration
            stack.append([start + duration, thread.name[i], duration, 0.0])
        while stack:
            _close(stack.pop(), totals)
    return totals


def _close(span: list[float], totals: dict[int, list[float]]) -> None:
    name = int(span[1])
    if name < 0:
        return
    own = max(0.0, span[2] - span[3])
    slot = totals.get(name)
    if slot is None:
        slot = totals[name] = [0.0, 0, 0.0]
    slot[0] += own
    slot[1] += 1
    slot[2] = max(slot[2], own)


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _minus(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Time of ``intervals`` (merged) not under ``cover`` (merged)."""
    return _union(intervals + cover) - _union(cover)


def _device_steps(acc: _Acc, steps: tuple[HostStep, ...]) -> tuple[DeviceStep, ...]:
    """Device work goes to the host step whose span started last before it (as copies do on the NPU)."""
    if not steps or not len(acc.dev_start):
        return ()
    starts = [s.start_us for s in steps]
    per_step: list[tuple[list[tuple[float, float]], list[tuple[float, float]]]] = [([], []) for _ in steps]
    for start, end, kind in zip(acc.dev_start, acc.dev_end, acc.dev_kind, strict=True):
        index = bisect_right(starts, start) - 1
        if index < 0 or kind > 1:  # copies and sets: in Free (their own share comes from the copies)
            continue
        compute, comm = per_step[index]
        (compute if kind == 0 else comm).append((start, end))
    out = []
    for step, (compute, comm) in zip(steps, per_step, strict=True):
        out.append(DeviceStep(step.step, step.duration_us, _union(compute), _minus(comm, compute), _union(compute + comm)))
    return tuple(out)


def _launchers(path: Path, acc: _Acc, limits: Limits, budget: Budget) -> dict[int, str]:
    """External id -> the CPU operator that launched a kernel: a second pass over the file, for the ids kernels name."""
    wanted = {ext for ext in acc.kernel_ext if ext >= 0}
    found: dict[int, str] = {}
    if not wanted:
        return found
    with _open(path, limits) as handle:
        for event in trace_events(handle, path.name, limits, budget):
            if isinstance(event, dict) and event.get("cat") == _CPU_OP and isinstance(event.get("name"), str):
                ext = as_int(json_object(event.get("args")).get("External id"))
                if ext in wanted and ext not in found:
                    budget.hold(DEVICE_EVENT)
                    found[ext] = budget.name(event["name"])
    return found


def _kernels(acc: _Acc, launchers: dict[int, str]) -> tuple[OpTypeTime, ...]:
    by_name = {v: k for k, v in acc.names.items()}
    slots: dict[str, list[float]] = {}
    for ext, name, duration in zip(acc.kernel_ext, acc.kernel_name, acc.kernel_us, strict=True):
        op = launchers.get(ext) or by_name[name]
        slot = slots.setdefault(op, [0.0, 0, 0.0])
        slot[0] += duration
        slot[1] += 1
        slot[2] = max(slot[2], duration)
    return merge_op_types(OpTypeTime(op, s[0], int(s[1]), s[2]) for op, s in slots.items())


def read_torch_trace(path: Path, limits: Limits = Limits()) -> TorchTrace:
    """Steps, CPU operator self times and CUDA device work of one trace file.

    A trace cut mid-way yields what was read before the cut, with a ``truncated`` issue.
    """
    budget = Budget.of(limits)
    acc, issues = _Acc(limits, budget), []
    with _open(path, limits) as handle:
        try:
            for event in trace_events(handle, path.name, limits, budget):
                acc.add(event)
        except ProfileParseError as exc:
            if acc.events == 0 or exc.reason in CAP_REASONS:
                raise
            issues.append(Issue(exc.reason, f"{exc.message}; used the {acc.events} events before it"))
    if acc.bad:
        issues.append(Issue("bad_value", f"{path.name}: {acc.bad} trace events without usable ts/dur skipped"))
    if acc.dropped:
        issues.append(Issue("too_large", f"{path.name}: over {limits.max_memcpy_events} device events; rest ignored"))
    by_name = {v: k for k, v in acc.names.items()}
    cpu_ops = merge_op_types(OpTypeTime(by_name[n], s[0], int(s[1]), s[2]) for n, s in _self_times(acc).items())
    acc.threads.clear()
    steps = tuple(sorted(acc.steps, key=lambda s: s.start_us))
    kernels = _kernels(acc, _launchers(path, acc, limits, budget)) if len(acc.kernel_ext) else ()
    communication = sum(e - s for s, e, k in zip(acc.dev_start, acc.dev_end, acc.dev_kind, strict=True) if k == 1)
    return TorchTrace(steps, cpu_ops, kernels, communication, tuple(acc.copies), _device_steps(acc, steps), acc.events, tuple(issues))


def _open(path: Path, limits: Limits) -> BinaryIO:
    """Through exporter.core.inputfile: a regular file no larger than ``max_trace_bytes``."""
    try:
        return open_input(path, limits.max_trace_bytes)
    except InputRefused as exc:
        raise ProfileParseError(exc.reason, exc.message.replace(os.fspath(path), path.name, 1)) from None


def trace_events(handle: Readable, name: str, limits: Limits, budget: Budget | None = None) -> Iterator[Any]:
    """The events of a top-level array, or of the `traceEvents` array of an object (streamed)."""
    return json_trace_events(handle, name, json_caps(limits, budget=budget))
