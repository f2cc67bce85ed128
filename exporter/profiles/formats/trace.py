"""The Chrome-trace timeline (trace_view.json, msprof_*.json), streamed event by event: host
step spans, memory copies and the Overlap Analysis sums.
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exporter.profiles.formats.budget import HOST_STEP, MEMCPY_TASK, PROCESS, Budget
from exporter.profiles.formats.common import (
    Issue,
    Limits,
    ProfileParseError,
    as_int,
    json_object,
)
from exporter.profiles.formats.jsonstream import (
    Readable,
    event_span,
    json_caps,
    trace_events,
)


@dataclass(frozen=True, slots=True)
class HostStep:
    """`ProfilerStep#N` on the Python track: host step boundaries (us since epoch)."""

    step: int
    start_us: float
    duration_us: float


@dataclass(frozen=True, slots=True)
class MemcpyTask:
    """One MEMCPY_ASYNC task on `Ascend Hardware` ("Memory copies")."""

    start_us: float
    duration_us: float
    kind: str  # h2d, d2h, d2d, h2d_d2h (PCIe, direction not recorded), other
    device_id: int | None = None


@dataclass(frozen=True)
class OverlapTotals:
    """Sums of the `Overlap Analysis` track of one device ("Overlap Analysis"), microseconds."""

    device_id: int | None
    computing_us: float = 0.0
    communication_us: float = 0.0
    communication_not_overlapped_us: float = 0.0
    free_us: float = 0.0
    lead_free_us: float = 0.0  # idle before the first compute/communication (start-up)
    tail_free_us: float = 0.0  # idle after the last one

    @property
    def active_free_us(self) -> float:
        """Free scoped to the busy span: whole-app runs start with seconds of idle ("Overlap Analysis")."""
        return max(0.0, self.free_us - self.lead_free_us - self.tail_free_us)


@dataclass(frozen=True)
class TraceData:
    host_steps: tuple[HostStep, ...]
    memcpy: tuple[MemcpyTask, ...]
    overlaps: tuple[OverlapTotals, ...]
    events: int
    issues: tuple[Issue, ...] = ()


_OVERLAP = {
    "Computing": "computing_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "communication_not_overlapped_us",
    "Free": "free_us",
}
_MEMCPY_OPERATIONS = {
    "host to device": "h2d",
    "host to device ex": "h2d",
    "device to host": "d2h",
    "device to host ex": "d2h",
    "device to device": "d2d",
    "addr device to device": "d2d",
}
_MEMCPY_QUEUES = {"PCIE_DMA_SQE": "h2d_d2h", "SDMA_SQE": "d2d"}
_NPU_LABEL = re.compile(r"^NPU\s*(\d+)$")
_PROCESS_TEXT = 64  # characters of a process name or label kept: the ones compared are short
# File-level refusals: what was read before is not used (a cut or a bad event keeps it).
CAP_REASONS = frozenset({"item_too_large", "too_deep", "too_many_objects", "too_many_events", "memory_budget", "cpu_budget"})


def memcpy_kind(task_type: object, operation: object) -> str:
    """Direction from `args.operation` when newer CANN writes it, else from the DMA queue."""
    if isinstance(operation, str) and operation.strip().lower() in _MEMCPY_OPERATIONS:
        return _MEMCPY_OPERATIONS[operation.strip().lower()]
    if isinstance(task_type, str) and task_type in _MEMCPY_QUEUES:
        return _MEMCPY_QUEUES[task_type]
    return "other"


class _OverlapAcc:
    """Running sums for one pid; lead/tail idle found without keeping the events."""

    def __init__(self) -> None:
        self.sums = dict.fromkeys(_OVERLAP.values(), 0.0)
        self.busy_start = float("inf")
        self.busy_end = float("-inf")
        self.first_free: tuple[float, float] | None = None  # (start, duration)
        self.last_free: tuple[float, float] | None = None

    def add(self, category: str, start: float, duration: float) -> None:
        self.sums[_OVERLAP[category]] += duration
        if category == "Free":
            if self.first_free is None or start < self.first_free[0]:
                self.first_free = (start, duration)
            if self.last_free is None or start + duration > sum(self.last_free):
                self.last_free = (start, duration)
        else:
            self.busy_start = min(self.busy_start, start)
            self.busy_end = max(self.busy_end, start + duration)

    def totals(self, device: int | None) -> OverlapTotals:
        lead = tail = 0.0
        slack = 0.5  # us: ts strings have ns digits, float sums do not
        if self.first_free and sum(self.first_free) <= self.busy_start + slack:
            lead = self.first_free[1]
        if self.last_free and self.last_free[0] >= self.busy_end - slack:  # never also lead: busy lies between
            tail = self.last_free[1]
        if self.busy_start == float("inf") and self.first_free:  # no busy span at all
            lead, tail = self.sums["free_us"], 0.0
        sums = self.sums
        return OverlapTotals(
            device,
            computing_us=sums["computing_us"],
            communication_us=sums["communication_us"],
            communication_not_overlapped_us=sums["communication_not_overlapped_us"],
            free_us=sums["free_us"],
            lead_free_us=lead,
            tail_free_us=tail,
        )


class _TraceAcc:
    """What a trace's events leave: every record charged to ``budget``; a process id that is a
    string is kept cut and interned (Budget.name), so equal ids meet however long they are."""

    def __init__(self, limits: Limits, budget: Budget) -> None:
        self.limits, self.budget = limits, budget
        self.process_names: dict[object, str] = {}
        self.process_labels: dict[object, str] = {}
        self.host_steps: list[HostStep] = []
        self.memcpy: list[tuple[object, float, float, str]] = []
        self.overlap: dict[object, _OverlapAcc] = {}
        self.events = self.bad = self.dropped_memcpy = self.dropped_steps = self.dropped_processes = 0

    def add(self, event: Any) -> None:
        self.events += 1
        if self.events > self.limits.max_trace_events:
            raise ProfileParseError("too_many_events", f"more than {self.limits.max_trace_events} trace events")
        pid = event.get("pid") if isinstance(event, dict) else None
        if not isinstance(event, dict) or not isinstance(pid, (int, float, str, type(None))):
            self.bad += 1  # not an event, or a pid we could not use as a key
            return
        phase, name = event.get("ph"), event.get("name")
        if phase == "M":
            self._metadata(event, name, pid)
        elif phase == "X" and isinstance(name, str):
            if name == "MEMCPY_ASYNC" or name.startswith("ProfilerStep#") or name in _OVERLAP:
                self._span(event, name, pid)

    def _pid(self, pid: object) -> object:
        return self.budget.name(pid) if isinstance(pid, str) else pid

    def _metadata(self, event: dict[str, Any], name: object, pid: object) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            return
        if name == "process_name" and isinstance(args.get("name"), str):
            self._remember(self.process_names, self._pid(pid), args["name"])
        elif name == "process_labels" and isinstance(args.get("labels"), str):
            self._remember(self.process_labels, self._pid(pid), args["labels"])

    def _remember(self, table: dict[object, str], pid: object, text: str) -> None:
        """At most max_trace_processes pids; a longer text than any compared is kept as ''."""
        if pid not in table:
            if len(table) >= self.limits.max_trace_processes:
                self.dropped_processes += 1
                return
            self.budget.hold(PROCESS)
        table[pid] = text if len(text) <= _PROCESS_TEXT else ""

    def _span(self, event: dict[str, Any], name: str, pid: object) -> None:
        span = event_span(event)
        if span is None:
            self.bad += 1
            return
        start, duration = span
        pid = self._pid(pid)
        if name == "MEMCPY_ASYNC":
            if len(self.memcpy) >= self.limits.max_memcpy_tasks:
                self.dropped_memcpy += 1
                return
            self.budget.hold(MEMCPY_TASK)
            args = json_object(event.get("args"))
            self.memcpy.append((pid, start, duration, memcpy_kind(args.get("Task Type"), args.get("operation"))))
        elif name.startswith("ProfilerStep#"):
            step = as_int(name.removeprefix("ProfilerStep#"))
            if step is None:
                return
            if len(self.host_steps) >= self.limits.max_host_steps:
                self.dropped_steps += 1
                return
            self.budget.hold(HOST_STEP)
            self.host_steps.append(HostStep(step, start, duration))
        else:
            acc = self.overlap.get(pid)
            if acc is None:
                if len(self.overlap) >= self.limits.max_trace_processes:
                    self.dropped_processes += 1
                    return
                self.budget.hold(PROCESS)
                acc = self.overlap[pid] = _OverlapAcc()
            acc.add(name, start, duration)

    def _device(self, pid: object) -> int | None:
        match = _NPU_LABEL.match(self.process_labels.get(pid, "").strip())
        return int(match.group(1)) if match else None

    def _is(self, pid: object, process: str) -> bool:
        """Unknown pids pass: msprof writes metadata after the events it describes."""
        return self.process_names.get(pid, process) == process

    def result(self, issues: list[Issue], name: str) -> TraceData:
        if self.bad:
            issues.append(Issue("bad_value", f"{name}: {self.bad} trace events without usable ts/dur skipped"))
        if self.dropped_memcpy:
            issues.append(Issue("too_large", f"{name}: over {self.limits.max_memcpy_tasks} MEMCPY_ASYNC events; rest ignored"))
        if self.dropped_steps:
            issues.append(Issue("too_large", f"{name}: over {self.limits.max_host_steps} ProfilerStep spans; rest ignored"))
        if self.dropped_processes:
            issues.append(
                Issue(
                    "too_large",
                    f"{name}: over {self.limits.max_trace_processes} processes; {self.dropped_processes} events of the others ignored",
                )
            )
        memcpy = tuple(
            MemcpyTask(start, duration, kind, self._device(pid))
            for pid, start, duration, kind in self.memcpy
            if self._is(pid, "Ascend Hardware")
        )
        overlaps = tuple(acc.totals(self._device(pid)) for pid, acc in self.overlap.items() if self._is(pid, "Overlap Analysis"))
        steps = tuple(sorted(self.host_steps, key=lambda s: s.start_us))
        return TraceData(steps, memcpy, overlaps, self.events, tuple(issues))


def read_trace(handle: Readable, name: str = "trace_view.json", limits: Limits = Limits(), budget: Budget | None = None) -> TraceData:
    """Step spans, memory copies and Overlap Analysis sums from a Chrome trace ("trace_view.json and the msprof timeline").

    A trace cut mid-way (or with an unreadable event) yields what was read before, with a
    ``truncated`` (``malformed``) issue; past a cap (CAP_REASONS) the file is refused. Its work
    and what it keeps are charged to ``budget`` (the export's; a fresh one by default).
    """
    budget = budget or Budget.of(limits)
    acc, issues = _TraceAcc(limits, budget), []
    try:
        for event in trace_events(handle, name, json_caps(limits, budget=budget)):
            acc.add(event)
    except ProfileParseError as exc:
        message = exc.message if exc.message.startswith(name) else f"{name}: {exc.message}"
        if acc.events == 0 or exc.reason in CAP_REASONS:
            raise ProfileParseError(exc.reason, message) from None
        issues.append(Issue(exc.reason, f"{message}; used the {acc.events} events before it"))
    return acc.result(issues, name)


def merge_traces(parts: Iterable[TraceData]) -> TraceData | None:
    """msprof `msprof_slice_N_*.json`: one timeline split over several files."""
    parts = list(parts)
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    by_device: dict[int | None, list[OverlapTotals]] = {}
    for part in parts:
        for totals in part.overlaps:
            by_device.setdefault(totals.device_id, []).append(totals)
    overlaps = tuple(_sum_overlaps(device, items) for device, items in by_device.items())
    return TraceData(
        tuple(sorted((s for p in parts for s in p.host_steps), key=lambda s: s.start_us)),
        tuple(m for p in parts for m in p.memcpy),
        overlaps,
        sum(p.events for p in parts),
        tuple(i for p in parts for i in p.issues),
    )


def _sum_overlaps(device: int | None, items: list[OverlapTotals]) -> OverlapTotals:
    # Slices are consecutive: the first slice's lead idle and the last slice's tail idle stay.
    return OverlapTotals(
        device,
        computing_us=sum(i.computing_us for i in items),
        communication_us=sum(i.communication_us for i in items),
        communication_not_overlapped_us=sum(i.communication_not_overlapped_us for i in items),
        free_us=sum(i.free_us for i in items),
        lead_free_us=items[0].lead_free_us,
        tail_free_us=items[-1].tail_free_us,
    )
