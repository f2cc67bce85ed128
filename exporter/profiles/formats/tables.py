"""The CSV deliverables of an export: step times, kernels, operator and API statistics,
task times and msprof's graph-mode step trace. All times stay in microseconds.

Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from exporter.profiles.formats.budget import (
    GUESSED_TYPE,
    KERNEL_GROUP,
    MAX_NAME,
    TABLE_ROW,
    TASK_TYPE,
    Budget,
)
from exporter.profiles.formats.common import (
    Issue,
    ProfileParseError,
    as_int,
    cell_float,
    frozen_map,
    is_na,
)
from exporter.profiles.formats.csvtable import Table

R = TypeVar("R")


@dataclass(frozen=True)
class Rows(Generic[R]):
    """The records of a CSV's usable rows, and what made the others unusable."""

    rows: tuple[R, ...]
    issues: tuple[Issue, ...] = ()


def float_at(row: list[str], index: int | None) -> float | None:
    """The number in an optional column; None where the table has no such column."""
    return None if index is None else cell_float(row[index])


def int_at(row: list[str], index: int | None) -> int | None:
    return None if index is None else as_int(row[index])


# --- step_trace_time.csv (torch_npu / MindSpore) and cluster_step_trace_time.csv -------------


@dataclass(frozen=True, slots=True)
class StepTime:
    """One row of step_trace_time.csv ("step_trace_time.csv"); all times in microseconds."""

    step: int | None  # "Step" (empty: one row for the whole capture)
    computing_us: float  # "Computing"
    communication_not_overlapped_us: float  # "Communication(Not Overlapped)"
    free_us: float  # "Free" (device idle, includes copies)
    overlapped_us: float | None = None  # "Overlapped"
    communication_us: float | None = None  # "Communication"
    stage_us: float | None = None  # "Stage"
    bubble_us: float | None = None  # "Bubble"
    preparing_us: float | None = None  # "Preparing" (host start -> first device task)
    device_id: int | None = None  # "Device_id" (newer torch_npu)
    rank: int | None = None  # cluster file: "Index" of a Type=rank row

    @property
    def e2e_us(self) -> float:
        """Device step time, msprof-analyze's `Free + Computing + Communication(Not Overlapped)`."""
        return self.computing_us + self.communication_not_overlapped_us + self.free_us


class StepTraceTable(Rows[StepTime]):
    """step_trace_time.csv: a StepTime per usable row (Type=rank rows of the cluster file)."""


def read_step_trace(lines: Iterable[str], name: str = "step_trace_time.csv", budget: Budget | None = None) -> StepTraceTable:
    table = Table(lines, name, budget)
    need = [table.require(c) for c in ("Computing", "Communication(Not Overlapped)", "Free")]
    i_overlapped, i_communication, i_stage, i_bubble, i_preparing = (
        table.column(c) for c in ("Overlapped", "Communication", "Stage", "Bubble", "Preparing")
    )
    i_step, i_device = table.column("Step"), table.column("Device_id")
    i_type, i_index = table.column("Type"), table.column("Index")
    rows, bad = [], 0
    for row in table.rows():
        if i_type is not None and row[i_type].strip() != "rank":
            continue  # cluster file: Type=stage rows are maxima over a PP group, not a rank
        computing, not_overlapped, free = (cell_float(row[i]) for i in need)
        if computing is None or not_overlapped is None or free is None:
            bad += 1
            continue
        table.hold(TABLE_ROW)
        rows.append(
            StepTime(
                step=int_at(row, i_step),
                computing_us=computing,
                communication_not_overlapped_us=not_overlapped,
                free_us=free,
                overlapped_us=float_at(row, i_overlapped),
                communication_us=float_at(row, i_communication),
                stage_us=float_at(row, i_stage),
                bubble_us=float_at(row, i_bubble),
                preparing_us=float_at(row, i_preparing),
                device_id=int_at(row, i_device),
                rank=as_int(row[i_index]) if i_index is not None and i_type is not None else None,
            )
        )
    return StepTraceTable(tuple(rows), table.issues(bad))


# --- kernel_details.csv (torch_npu) / op_summary_*.csv (msprof) ------------------------------


@dataclass(frozen=True, slots=True)
class OpTypeTime:
    """Device time of one operator type (communication excluded)."""

    op_type: str
    total_us: float
    count: int
    max_us: float


@dataclass(frozen=True)
class StepKernels:
    """The kernels of one step (``step`` None: the file has no Step Id)."""

    step: int | None
    op_types: tuple[OpTypeTime, ...]  # by total time, largest first
    compute_us: float  # sum of non-communication kernel durations
    communication_us: float  # sum of HCCL/COMMUNICATION rows
    wait_us: float  # sum of "Wait Time(us)": gaps before each task
    longest_name: str | None = None  # the single longest compute kernel
    longest_us: float | None = None


@dataclass(frozen=True)
class KernelTable:
    steps: tuple[StepKernels, ...]
    device_id: int | None = None
    rows: int = 0
    issues: tuple[Issue, ...] = ()


_COMM_CORES = frozenset({"HCCL", "COMMUNICATION"})


def op_type_from_name(name: str) -> str:
    """Best guess of an op type when the Type column is N/A ("Operator types at Level0").

    `aclnnInplaceRelu_Relu_Relu` -> Relu, `trans_TransData_3` -> TransData, `Conv2D1` -> Conv2D:
    the last non-numeric `_` segment, and a GE-style trailing index dropped from a single word.
    Linear in the name (a regular expression for the index took time quadratic in a run of
    digits, with the GIL held); callers pass names cut to MAX_NAME characters.
    """
    parts = [p for p in name.strip().split("_") if p and not p.isdigit()]
    if not parts:
        return name.strip() or "unknown"
    if len(parts) == 1:
        return parts[0].rstrip("0123456789") or parts[0]
    return parts[-1]


def is_communication(core: str, op_type: str, name: str) -> bool:
    return core.strip().upper() in _COMM_CORES or op_type.startswith("hcom_") or name.startswith("hcom_")


# Distinct (step, operator type, core) groups, and kernel names whose type is guessed, held at
# once: a real capture has thousands; a file with more is still read, its extra groups skipped.
MAX_KERNEL_GROUPS = 50_000


def read_kernels(lines: Iterable[str], name: str = "kernel_details.csv", budget: Budget | None = None) -> KernelTable:
    """Aggregates while streaming: memory depends on distinct (step, type), at most
    MAX_KERNEL_GROUPS of them and the export's memory allowance, never on rows (one line at a
    time, capped by the caller). Names longer than MAX_NAME are cut before they are compared."""
    table = Table(lines, name, budget)
    i_dur = table.require("Duration(us)", "Task Duration(us)")
    i_name = table.column("Name", "Op Name")
    i_type = table.column("Type", "OP Type")
    if i_name is None and i_type is None:
        table.require("Name", "Op Name", "Type", "OP Type")
    i_step, i_core = table.column("Step Id"), table.column("Accelerator Core", "Task Type")
    i_wait, i_device = table.column("Wait Time(us)", "Task Wait Time(us)"), table.column("Device_id")
    # (step, type, core) -> [total, count, max, name of max, wait]: one dict probe per row
    agg: dict[tuple[str, str, str], list[Any]] = {}
    guessed: dict[str, str] = {}
    rows = bad = over = 0
    device: int | None = None
    last = max(i for i in (i_dur, i_name, i_type, i_step, i_core, i_wait, i_device) if i is not None)
    for row in table.fast_rows(last):
        rows += 1
        try:
            duration = float(row[i_dur])
        except ValueError:
            bad += 1
            continue
        if not 0.0 <= duration < 1e15:  # NaN, inf, negative: not a duration
            bad += 1
            continue
        kernel = row[i_name] if i_name is not None else ""
        op_type = row[i_type] if i_type is not None else "N/A"
        step = row[i_step] if i_step is not None else ""
        core = row[i_core] if i_core is not None else ""
        if len(kernel) > MAX_NAME:  # cut (or refused) before use, so equal cut names meet
            kernel = table.kept(kernel)
        if len(op_type) > MAX_NAME:
            op_type = table.kept(op_type)
        if len(step) > MAX_NAME or len(core) > MAX_NAME:
            step, core = table.kept(step), table.kept(core)
        if is_na(op_type):
            guess = guessed.get(kernel)
            if guess is None:
                guess = op_type_from_name(kernel)
                if len(guessed) < MAX_KERNEL_GROUPS:
                    table.hold(GUESSED_TYPE)
                    guess = guessed[table.kept(kernel)] = table.kept(guess)
            op_type = guess
        key = (step, op_type, core)
        slot = agg.get(key)
        if slot is None:
            if len(agg) >= MAX_KERNEL_GROUPS:
                over += 1
                continue
            table.hold(KERNEL_GROUP)
            key = (table.kept(step), table.kept(op_type), table.kept(core))
            slot = agg[key] = [0.0, 0, -1.0, table.kept(kernel), 0.0]
        slot[0] += duration
        slot[1] += 1
        if duration > slot[2]:
            slot[2], slot[3] = duration, table.kept(kernel)
        if i_wait is not None:
            try:
                slot[4] += float(row[i_wait])
            except ValueError:
                pass  # N/A gap: no gap known
        if device is None and i_device is not None:
            device = as_int(row[i_device])
    if rows and bad == rows:
        raise ProfileParseError("bad_value", f"{name}: no row has a numeric duration")
    issues = table.issues(bad)
    if over:
        issues += (Issue("too_large", f"{name}: over {MAX_KERNEL_GROUPS} distinct step/operator groups; {over} rows skipped"),)
    return KernelTable(_kernel_steps(agg), device, rows, issues)


def _kernel_steps(agg: dict[tuple[str, str, str], list[Any]]) -> tuple[StepKernels, ...]:
    by_step: dict[str, list[tuple[str, bool, list[Any]]]] = {}
    for (step, op_type, core), slot in agg.items():
        op_type = op_type.strip()
        # by name too: at Level0 the type of an HCCL row is guessed from `hcom_...` ("Communication rows")
        by_step.setdefault(step, []).append((op_type, is_communication(core, op_type, slot[3]), slot))
    out = []
    for step, entries in by_step.items():
        compute = [(t, s) for t, c, s in entries if not c]
        longest = max(compute, key=lambda e: e[1][2], default=None)
        out.append(
            StepKernels(
                step=as_int(step),
                op_types=merge_op_types(OpTypeTime(t, s[0], s[1], s[2]) for t, s in compute),
                compute_us=sum(s[0] for _, s in compute),
                communication_us=sum(s[0] for _, c, s in entries if c),
                wait_us=sum(s[4] for _, _, s in entries),
                longest_name=longest[1][3] if longest else None,
                longest_us=longest[1][2] if longest else None,
            )
        )
    return tuple(sorted(out, key=lambda s: (s.step is None, s.step or 0)))


def merge_op_types(items: Iterable[OpTypeTime]) -> tuple[OpTypeTime, ...]:
    merged: dict[str, OpTypeTime] = {}
    for item in items:
        old = merged.get(item.op_type)
        merged[item.op_type] = (
            item
            if old is None
            else OpTypeTime(item.op_type, old.total_us + item.total_us, old.count + item.count, max(old.max_us, item.max_us))
        )
    return tuple(sorted(merged.values(), key=lambda o: (-o.total_us, o.op_type)))


def merge_kernel_tables(tables: Iterable[KernelTable]) -> KernelTable | None:
    """Concatenate msprof `_slice_N` parts (same step may appear in several)."""
    tables = list(tables)
    if not tables:
        return None
    steps: dict[int | None, list[StepKernels]] = {}
    for table in tables:
        for step in table.steps:
            steps.setdefault(step.step, []).append(step)
    merged = tuple(_merge_steps(key, parts) for key, parts in sorted(steps.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
    device = next((t.device_id for t in tables if t.device_id is not None), None)
    return KernelTable(merged, device, sum(t.rows for t in tables), tuple(i for t in tables for i in t.issues))


def _merge_steps(step: int | None, parts: list[StepKernels]) -> StepKernels:
    longest = max((p for p in parts if p.longest_us is not None), key=lambda p: p.longest_us or 0.0, default=None)
    return StepKernels(
        step=step,
        op_types=merge_op_types(o for p in parts for o in p.op_types),
        compute_us=sum(p.compute_us for p in parts),
        communication_us=sum(p.communication_us for p in parts),
        wait_us=sum(p.wait_us for p in parts),
        longest_name=longest.longest_name if longest else None,
        longest_us=longest.longest_us if longest else None,
    )


# --- op_statistic.csv, api_statistic.csv, task_time.csv, msprof step_trace_*.csv -------------


@dataclass(frozen=True)
class OpStatistic:
    """op_statistic: per op type totals over the whole capture ("op_statistic"); no step split."""

    op_types: tuple[OpTypeTime, ...]
    device_id: int | None = None
    issues: tuple[Issue, ...] = ()


def read_op_statistic(lines: Iterable[str], name: str = "op_statistic.csv", budget: Budget | None = None) -> OpStatistic:
    table = Table(lines, name, budget)
    i_type, i_total = table.require("OP Type", "Op Type", "Type"), table.require("Total Time(us)")
    i_count, i_max = table.column("Count"), table.column("Max Time(us)")
    i_core, i_device = table.column("Core Type"), table.column("Device_id")
    items, device = [], None
    for row, total in table.numbered(i_total):
        core = row[i_core] if i_core is not None else ""
        op_type = table.kept(row[i_type].strip())
        if is_communication(core, op_type, op_type):
            continue
        table.hold(TABLE_ROW)
        count = int_at(row, i_count)
        most = float_at(row, i_max)
        items.append(OpTypeTime(op_type, total, count or 0, most if most is not None else total))
        if device is None and i_device is not None:
            device = as_int(row[i_device])
    return OpStatistic(merge_op_types(items), device, table.issues())


@dataclass(frozen=True, slots=True)
class ApiStat:
    """One row of api_statistic: host-side CANN API time ("api_statistic")."""

    level: str
    api: str
    time_us: float
    count: int | None


class ApiStatistic(Rows[ApiStat]):
    """api_statistic: an ApiStat per usable row, by time, largest first."""


def read_api_statistic(lines: Iterable[str], name: str = "api_statistic.csv", budget: Budget | None = None) -> ApiStatistic:
    table = Table(lines, name, budget)
    i_api, i_time = table.require("API Name"), table.require("Time(us)")
    i_level, i_count = table.column("Level"), table.column("Count")
    items = []
    for row, time_us in table.numbered(i_time):
        table.hold(TABLE_ROW)
        items.append(
            ApiStat(
                level=table.kept(row[i_level].strip()) if i_level is not None else "",
                api=table.kept(row[i_api].strip()),
                time_us=time_us,
                count=int_at(row, i_count),
            )
        )
    items.sort(key=lambda a: (-a.time_us, a.api))
    return ApiStatistic(tuple(items), table.issues())


@dataclass(frozen=True)
class TaskTime:
    """task_time: device time by task type ("task_time"); memcpy rows are the copies."""

    by_type_us: Mapping[str, float]
    memcpy_us: float
    device_id: int | None = None
    issues: tuple[Issue, ...] = ()


def read_task_time(lines: Iterable[str], name: str = "task_time.csv", budget: Budget | None = None) -> TaskTime:
    table = Table(lines, name, budget)
    i_type, i_time = table.require("kernel_type", "Task Type"), table.require("task_time(us)", "Task Time(us)")
    i_device = table.column("Device_id")
    totals: dict[str, float] = {}
    device = None
    for row, time_us in table.numbered(i_time):
        kind = row[i_type].strip()
        if kind not in totals:
            kind = table.kept(kind)
            table.hold(TASK_TYPE)
        totals[kind] = totals.get(kind, 0.0) + time_us
        if device is None and i_device is not None:
            device = as_int(row[i_device])
    memcpy = sum(v for k, v in totals.items() if "MEMCPY" in k.upper())
    return TaskTime(frozen_map(totals), memcpy, device, table.issues())


@dataclass(frozen=True, slots=True)
class Iteration:
    """msprof step_trace_*.csv (graph mode, "msprof step_trace (graph mode)"), microseconds."""

    iteration: int | None
    iteration_us: float
    data_aug_bound_us: float | None


class IterationTable(Rows[Iteration]):
    """msprof step_trace_*.csv: an Iteration per usable row."""


def read_msprof_step_trace(lines: Iterable[str], name: str = "step_trace.csv", budget: Budget | None = None) -> IterationTable:
    table = Table(lines, name, budget)
    i_time = table.require("Iteration Time(us)")
    i_id, i_aug = table.column("Iteration ID"), table.column("Data Aug Bound(us)")
    items = []
    for row, time_us in table.numbered(i_time):
        table.hold(TABLE_ROW)
        items.append(Iteration(int_at(row, i_id), time_us, float_at(row, i_aug)))
    return IterationTable(tuple(items), table.issues())
