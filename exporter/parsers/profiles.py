"""Pure parsers for Ascend profiler exports: files in, frozen records out.

Covers torch_npu (`*_ascend_pt/ASCEND_PROFILER_OUTPUT/`), MindSpore (`*_ascend_ms`, same
layout), msprof (`PROF_*/mindstudio_profiler_output/`, `_slice_N` files concatenated) and
msprof-analyze cluster output (`cluster_step_trace_time.csv`). Formats, units and recipes:
../shared/fixtures/profiling/FORMATS.md (section numbers below refer to it).

Rules: columns are found by header name (never position); times stay in the file's unit
(us) until the indicators; CSVs are streamed row by row and JSON traces event by event, so
memory does not grow with the file. Only :class:`ProfileParseError` escapes; problems that
leave part of a file usable are returned as :class:`Issue` records next to the data.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TextIO

from exporter.errors import ReasonError

# --- errors, issues, limits ------------------------------------------------------------------


class ProfileParseError(ReasonError):
    """A file (or a whole profile) could not be used.

    ``reason`` is a short label-safe kind for self-metrics: ``unreadable``, ``empty``,
    ``missing_columns``, ``truncated``, ``malformed``, ``bad_value``, ``too_large``,
    ``no_data``, ``unsupported``.
    """



@dataclass(frozen=True)
class Issue:
    """Something that made part of a profile unusable; the rest was still used."""

    reason: str
    message: str


@dataclass(frozen=True)
class Limits:
    """Caps that keep one bad or giant export from stalling the exporter."""

    max_csv_bytes: int = 8 << 30        # streamed (~150 MB/s), so this only bounds the time spent
    max_trace_bytes: int = 1 << 30      # trace_view.json / msprof_*.json, streamed (~90 MB/s)
    max_json_bytes: int = 64 << 20      # small JSON files loaded whole (communication, info)
    max_json_event_bytes: int = 16 << 20
    max_memcpy_events: int = 2_000_000


NA = frozenset({"", "N/A", "NA", "n/a", "None", "-", "nan", "NaN"})
US = 1e-6  # seconds per microsecond

# --- small value helpers ---------------------------------------------------------------------


def _float(text: str | None) -> float | None:
    """A number from a cell; trailing TABs/spaces allowed (§2.2), N/A is None (§2.3)."""
    if text is None:
        return None
    text = text.strip()
    if text in NA:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _int(text: object) -> int | None:
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text
    if isinstance(text, float):
        return int(text) if text.is_integer() else None
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text in NA:
        return None
    try:
        return int(text)
    except ValueError:
        number = _float(text)
        return int(number) if number is not None and number.is_integer() else None


def _check_size(path: Path, limit: int) -> int:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None
    if size > limit:
        raise ProfileParseError(
            "too_large", f"{path.name}: {size / (1 << 20):.0f} MiB is over the {limit / (1 << 20):.0f} MiB limit; skipped"
        )
    return size


def _open_text(path: Path) -> TextIO:
    """Text mode for the csv module: newline='' keeps CRLF handling to csv (§2.5)."""
    try:
        return open(path, encoding="utf-8-sig", errors="replace", newline="")
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None


# --- CSV plumbing ----------------------------------------------------------------------------


class _Table:
    """A streamed CSV with columns looked up by (alias) header name."""

    def __init__(self, lines: Iterable[str], name: str) -> None:
        self.name = name
        self.lines = iter(lines)
        self.reader = csv.reader(self.lines)  # pulls one line at a time: self.lines stays in step
        self.short_rows = 0
        self.bad_rows = 0
        try:
            header = next(self.reader)
        except StopIteration:
            raise ProfileParseError("empty", f"{name}: empty file") from None
        except csv.Error as exc:
            raise ProfileParseError("malformed", f"{name}: unreadable header: {exc}") from None
        self.header = [h.strip().lstrip("\ufeff") for h in header]
        self.width = len(self.header)
        self._index = {h: i for i, h in reversed(list(enumerate(self.header)))}

    def column(self, *aliases: str) -> int | None:
        for alias in aliases:
            if alias in self._index:
                return self._index[alias]
        return None

    def require(self, *aliases: str) -> int:
        index = self.column(*aliases)
        if index is None:
            raise ProfileParseError(
                "missing_columns", f"{self.name}: no column {' or '.join(repr(a) for a in aliases)} in header"
            )
        return index

    def rows(self) -> Iterator[list[str]]:
        """Rows as wide as the header; short (cut) rows are counted and skipped."""
        width = self.width
        while True:
            try:
                row = next(self.reader)
            except StopIteration:
                return
            except csv.Error:
                # e.g. a NUL byte or an over-long field: lose this line, keep the rest.
                self.bad_rows += 1
                if self.bad_rows > 1000:
                    raise ProfileParseError("malformed", f"{self.name}: too many unreadable lines") from None
                continue
            if len(row) < width:
                if row:
                    self.short_rows += 1
                continue
            yield row

    def fast_rows(self, last: int) -> Iterator[list[str]]:
        """Rows split only up to column ``last`` (index ``last + 1`` holds the unsplit rest).

        str.split is about 3x faster than the csv module on wide rows; it is exact while no
        quote falls inside the columns we read. From the first line where one does (or a
        quoted field may span lines) the csv module takes over for the rest of the file.
        """
        cut = last + 1
        for line in self.lines:
            parts = line.split(",", cut)
            quote = line.find('"')
            # a quote before the unsplit rest, or an odd count (a field going on to the next line)
            if quote >= 0 and (quote < len(line) - len(parts[-1]) or line.count('"') & 1):
                self.reader = csv.reader(itertools.chain((line,), self.lines))
                yield from self.rows()
                return
            if len(parts) <= cut or line[-1:] not in "\r\n":
                odd = self._odd_line(line, parts, cut)
                if odd is not None:
                    yield odd
                continue
            yield parts

    def _odd_line(self, line: str, parts: list[str], cut: int) -> list[str] | None:
        """A row without its line end (the file may be cut there) or ending at a read column."""
        if not line.endswith(("\n", "\r")):
            row = next(csv.reader((line,)), [])
            if len(row) < self.width:
                self.short_rows += 1  # cut mid-row: the values in it cannot be trusted
                return None
        if len(parts) < cut:
            if line.strip():
                self.short_rows += 1
            return None
        parts[-1] = parts[-1].rstrip("\r\n")  # the read column is the row's last one
        return parts

    def issues(self, skipped_values: int = 0) -> tuple[Issue, ...]:
        out = []
        if self.short_rows:
            out.append(Issue("truncated", f"{self.name}: {self.short_rows} short (cut) rows skipped"))
        if self.bad_rows:
            out.append(Issue("malformed", f"{self.name}: {self.bad_rows} unreadable lines skipped"))
        if skipped_values:
            out.append(Issue("bad_value", f"{self.name}: {skipped_values} rows with a non-numeric value skipped"))
        return tuple(out)


def _read_csv(path: Path, reader: Callable[[Iterable[str], str], Any], limits: Limits) -> Any:
    _check_size(path, limits.max_csv_bytes)
    with _open_text(path) as handle:
        try:
            return reader(handle, path.name)
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None
        except UnicodeError as exc:  # errors='replace' makes this unlikely; belt and braces
            raise ProfileParseError("malformed", f"{path.name}: {exc}") from None


# --- step_trace_time.csv (torch_npu / MindSpore) and cluster_step_trace_time.csv -------------


@dataclass(frozen=True)
class StepTime:
    """One row of step_trace_time.csv (§3.1); all times in microseconds."""

    step: int | None                            # "Step" (empty: one row for the whole capture)
    computing_us: float                         # "Computing"
    communication_not_overlapped_us: float      # "Communication(Not Overlapped)"
    free_us: float                              # "Free" (device idle, includes copies)
    overlapped_us: float | None = None          # "Overlapped"
    communication_us: float | None = None       # "Communication"
    stage_us: float | None = None               # "Stage"
    bubble_us: float | None = None              # "Bubble"
    preparing_us: float | None = None           # "Preparing" (host start -> first device task)
    device_id: int | None = None                # "Device_id" (newer torch_npu)
    rank: int | None = None                     # cluster file: "Index" of a Type=rank row

    @property
    def e2e_us(self) -> float:
        """Device step time, msprof-analyze's `Free + Computing + Communication(Not Overlapped)`."""
        return self.computing_us + self.communication_not_overlapped_us + self.free_us


@dataclass(frozen=True)
class StepTraceTable:
    rows: tuple[StepTime, ...]
    issues: tuple[Issue, ...] = ()


def read_step_trace(lines: Iterable[str], name: str = "step_trace_time.csv") -> StepTraceTable:
    table = _Table(lines, name)
    need = [table.require(c) for c in ("Computing", "Communication(Not Overlapped)", "Free")]
    optional = {
        key: table.column(col)
        for key, col in (
            ("overlapped_us", "Overlapped"), ("communication_us", "Communication"), ("stage_us", "Stage"),
            ("bubble_us", "Bubble"), ("preparing_us", "Preparing"),
        )
    }
    i_step, i_device = table.column("Step"), table.column("Device_id")
    i_type, i_index = table.column("Type"), table.column("Index")
    rows, bad = [], 0
    for row in table.rows():
        if i_type is not None and row[i_type].strip() != "rank":
            continue  # cluster file: Type=stage rows are maxima over a PP group, not a rank
        computing, not_overlapped, free = (_float(row[i]) for i in need)
        if computing is None or not_overlapped is None or free is None:
            bad += 1
            continue
        extra = {key: _float(row[i]) if i is not None else None for key, i in optional.items()}
        rows.append(StepTime(
            step=_int(row[i_step]) if i_step is not None else None,
            computing_us=computing, communication_not_overlapped_us=not_overlapped, free_us=free,
            device_id=_int(row[i_device]) if i_device is not None else None,
            rank=_int(row[i_index]) if i_index is not None and i_type is not None else None,
            **extra,
        ))
    return StepTraceTable(tuple(rows), table.issues(bad))


# --- kernel_details.csv (torch_npu) / op_summary_*.csv (msprof) ------------------------------


@dataclass(frozen=True)
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
    op_types: tuple[OpTypeTime, ...]     # by total time, largest first
    compute_us: float                    # sum of non-communication kernel durations
    communication_us: float              # sum of HCCL/COMMUNICATION rows
    wait_us: float                       # sum of "Wait Time(us)": gaps before each task
    longest_name: str | None = None      # the single longest compute kernel
    longest_us: float | None = None


@dataclass(frozen=True)
class KernelTable:
    steps: tuple[StepKernels, ...]
    device_id: int | None = None
    rows: int = 0
    issues: tuple[Issue, ...] = ()


_COMM_CORES = frozenset({"HCCL", "COMMUNICATION"})
_OP_NAME_TAIL = re.compile(r"\d+$")


def op_type_from_name(name: str) -> str:
    """Best guess of an op type when the Type column is N/A (Level0, §3.3).

    `aclnnInplaceRelu_Relu_Relu` -> Relu, `trans_TransData_3` -> TransData, `Conv2D1` -> Conv2D:
    the last non-numeric `_` segment, and a GE-style trailing index dropped from a single word.
    """
    parts = [p for p in name.strip().split("_") if p and not p.isdigit()]
    if not parts:
        return name.strip() or "unknown"
    if len(parts) == 1:
        return _OP_NAME_TAIL.sub("", parts[0]) or parts[0]
    return parts[-1]


def _is_comm(core: str, op_type: str, name: str) -> bool:
    return core.strip().upper() in _COMM_CORES or op_type.startswith("hcom_") or name.startswith("hcom_")


def read_kernels(lines: Iterable[str], name: str = "kernel_details.csv") -> KernelTable:
    """Aggregates while streaming: memory depends on distinct (step, type), not on rows."""
    table = _Table(lines, name)
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
    rows = bad = 0
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
        if op_type in NA:
            op_type = guessed.get(kernel) or guessed.setdefault(kernel, op_type_from_name(kernel))
        key = (row[i_step] if i_step is not None else "", op_type, row[i_core] if i_core is not None else "")
        slot = agg.get(key)
        if slot is None:
            slot = agg[key] = [0.0, 0, -1.0, kernel, 0.0]
        slot[0] += duration
        slot[1] += 1
        if duration > slot[2]:
            slot[2], slot[3] = duration, kernel
        if i_wait is not None:
            try:
                slot[4] += float(row[i_wait])
            except ValueError:
                pass  # N/A gap: no gap known
        if device is None and i_device is not None:
            device = _int(row[i_device])
    if rows and bad == rows:
        raise ProfileParseError("bad_value", f"{name}: no row has a numeric duration")
    return KernelTable(_kernel_steps(agg), device, rows, table.issues(bad))


def _kernel_steps(agg: dict[tuple[str, str, str], list[Any]]) -> tuple[StepKernels, ...]:
    by_step: dict[str, list[tuple[str, bool, list[Any]]]] = {}
    for (step, op_type, core), slot in agg.items():
        op_type = op_type.strip()
        # by name too: at Level0 the type of an HCCL row is guessed from `hcom_...` (§3.3)
        by_step.setdefault(step, []).append((op_type, _is_comm(core, op_type, slot[3]), slot))
    out = []
    for step, entries in by_step.items():
        compute = [(t, s) for t, c, s in entries if not c]
        longest = max(compute, key=lambda e: e[1][2], default=None)
        out.append(StepKernels(
            step=_int(step),
            op_types=_merge_op_types(OpTypeTime(t, s[0], s[1], s[2]) for t, s in compute),
            compute_us=sum(s[0] for _, s in compute),
            communication_us=sum(s[0] for _, c, s in entries if c),
            wait_us=sum(s[4] for _, _, s in entries),
            longest_name=longest[1][3] if longest else None,
            longest_us=longest[1][2] if longest else None,
        ))
    return tuple(sorted(out, key=lambda s: (s.step is None, s.step or 0)))


def _merge_op_types(items: Iterable[OpTypeTime]) -> tuple[OpTypeTime, ...]:
    merged: dict[str, OpTypeTime] = {}
    for item in items:
        old = merged.get(item.op_type)
        merged[item.op_type] = item if old is None else OpTypeTime(
            item.op_type, old.total_us + item.total_us, old.count + item.count, max(old.max_us, item.max_us)
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
        op_types=_merge_op_types(o for p in parts for o in p.op_types),
        compute_us=sum(p.compute_us for p in parts),
        communication_us=sum(p.communication_us for p in parts),
        wait_us=sum(p.wait_us for p in parts),
        longest_name=longest.longest_name if longest else None,
        longest_us=longest.longest_us if longest else None,
    )


# --- op_statistic.csv, api_statistic.csv, task_time.csv, msprof step_trace_*.csv -------------


@dataclass(frozen=True)
class OpStatistic:
    """op_statistic: per op type totals over the whole capture (§3.4); no step split."""

    op_types: tuple[OpTypeTime, ...]
    device_id: int | None = None
    issues: tuple[Issue, ...] = ()


def read_op_statistic(lines: Iterable[str], name: str = "op_statistic.csv") -> OpStatistic:
    table = _Table(lines, name)
    i_type, i_total = table.require("OP Type", "Op Type", "Type"), table.require("Total Time(us)")
    i_count, i_max = table.column("Count"), table.column("Max Time(us)")
    i_core, i_device = table.column("Core Type"), table.column("Device_id")
    items, bad, device = [], 0, None
    for row in table.rows():
        total = _float(row[i_total])
        if total is None:
            bad += 1
            continue
        core = row[i_core] if i_core is not None else ""
        op_type = row[i_type].strip()
        if _is_comm(core, op_type, op_type):
            continue
        count = _int(row[i_count]) if i_count is not None else None
        most = _float(row[i_max]) if i_max is not None else None
        items.append(OpTypeTime(op_type, total, count or 0, most if most is not None else total))
        if device is None and i_device is not None:
            device = _int(row[i_device])
    return OpStatistic(_merge_op_types(items), device, table.issues(bad))


@dataclass(frozen=True)
class ApiStat:
    """One row of api_statistic: host-side CANN API time (§3.6)."""

    level: str
    api: str
    time_us: float
    count: int | None


@dataclass(frozen=True)
class ApiStatistic:
    items: tuple[ApiStat, ...]                   # by time, largest first
    issues: tuple[Issue, ...] = ()


def read_api_statistic(lines: Iterable[str], name: str = "api_statistic.csv") -> ApiStatistic:
    table = _Table(lines, name)
    i_api, i_time = table.require("API Name"), table.require("Time(us)")
    i_level, i_count = table.column("Level"), table.column("Count")
    items, bad = [], 0
    for row in table.rows():
        time_us = _float(row[i_time])
        if time_us is None:
            bad += 1
            continue
        items.append(ApiStat(
            level=row[i_level].strip() if i_level is not None else "",
            api=row[i_api].strip(),
            time_us=time_us,
            count=_int(row[i_count]) if i_count is not None else None,
        ))
    items.sort(key=lambda a: (-a.time_us, a.api))
    return ApiStatistic(tuple(items), table.issues(bad))


@dataclass(frozen=True)
class TaskTime:
    """task_time: device time by task type (§3.5); memcpy rows are the copies."""

    by_type_us: Mapping[str, float]
    memcpy_us: float
    device_id: int | None = None
    issues: tuple[Issue, ...] = ()


def read_task_time(lines: Iterable[str], name: str = "task_time.csv") -> TaskTime:
    table = _Table(lines, name)
    i_type, i_time = table.require("kernel_type", "Task Type"), table.require("task_time(us)", "Task Time(us)")
    i_device = table.column("Device_id")
    totals: dict[str, float] = {}
    bad, device = 0, None
    for row in table.rows():
        time_us = _float(row[i_time])
        if time_us is None:
            bad += 1
            continue
        kind = row[i_type].strip()
        totals[kind] = totals.get(kind, 0.0) + time_us
        if device is None and i_device is not None:
            device = _int(row[i_device])
    memcpy = sum(v for k, v in totals.items() if "MEMCPY" in k.upper())
    return TaskTime(_frozen_map(totals), memcpy, device, table.issues(bad))


@dataclass(frozen=True)
class Iteration:
    """msprof step_trace_*.csv (graph mode, §3.10), microseconds."""

    iteration: int | None
    iteration_us: float
    data_aug_bound_us: float | None


@dataclass(frozen=True)
class IterationTable:
    items: tuple[Iteration, ...]
    issues: tuple[Issue, ...] = ()


def read_msprof_step_trace(lines: Iterable[str], name: str = "step_trace.csv") -> IterationTable:
    table = _Table(lines, name)
    i_time = table.require("Iteration Time(us)")
    i_id, i_aug = table.column("Iteration ID"), table.column("Data Aug Bound(us)")
    items, bad = [], 0
    for row in table.rows():
        time_us = _float(row[i_time])
        if time_us is None:
            bad += 1
            continue
        items.append(Iteration(
            _int(row[i_id]) if i_id is not None else None,
            time_us,
            _float(row[i_aug]) if i_aug is not None else None,
        ))
    return IterationTable(tuple(items), table.issues(bad))


def _frozen_map(values: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(values))


def _dict(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (wrong shapes read as absent)."""
    return value if isinstance(value, dict) else {}


# --- JSON: streamed trace events -------------------------------------------------------------

_WS = " \t\r\n"


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> str: ...


def iter_json_array(handle: _Reader, name: str, chunk: int = 1 << 20, max_item: int = 16 << 20) -> Iterator[Any]:
    """Items of a top-level JSON array, decoded one at a time from ``chunk``-sized reads.

    Raises ProfileParseError("truncated") when the file ends inside the array (a cut
    file) and ("malformed") for anything that is not an array or not JSON.
    """
    decoder = json.JSONDecoder()
    buf, eof = handle.read(chunk), False
    pos = _skip(buf, 0, _WS)
    if pos >= len(buf):
        raise ProfileParseError("empty", f"{name}: empty file")
    if buf[pos] != "[":
        raise ProfileParseError("malformed", f"{name}: not a JSON array of trace events")
    pos += 1
    while True:
        pos = _skip(buf, pos, _WS + ",")
        if pos >= len(buf) or buf[pos] != "]":
            try:
                if pos >= len(buf):
                    raise ValueError("need more data")
                item, end = decoder.raw_decode(buf, pos)
            except RecursionError:
                raise ProfileParseError("malformed", f"{name}: JSON nested too deeply") from None
            except ValueError as exc:
                if eof:
                    if _cut_short(buf, exc):
                        raise ProfileParseError("truncated", f"{name}: JSON ends inside the event list (file cut short?)") from None
                    raise ProfileParseError("malformed", f"{name}: unreadable JSON event: {exc}") from None
                if len(buf) - pos > max_item:
                    raise ProfileParseError("malformed", f"{name}: unreadable JSON event (or one over {max_item >> 20} MiB)") from None
                more = handle.read(chunk)
                eof = not more
                buf, pos = buf[pos:] + more, 0
                continue
            yield item
            pos = end
            if pos > chunk:  # drop consumed text so the buffer stays about one chunk
                buf, pos = buf[pos:], 0
            continue
        return


def _cut_short(text: str, exc: ValueError) -> bool:
    """A decode error at the very end (or an unclosed string) means the file was cut."""
    if not isinstance(exc, json.JSONDecodeError):
        return True  # ran out of data before an item started
    return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")


def _skip(text: str, pos: int, chars: str) -> int:
    end = len(text)
    while pos < end and text[pos] in chars:
        pos += 1
    return pos


@dataclass(frozen=True)
class HostStep:
    """`ProfilerStep#N` on the Python track: host step boundaries (us since epoch)."""

    step: int
    start_us: float
    duration_us: float


@dataclass(frozen=True)
class MemcpyTask:
    """One MEMCPY_ASYNC task on `Ascend Hardware` (§3.7)."""

    start_us: float
    duration_us: float
    kind: str                        # h2d, d2h, d2d, h2d_d2h (PCIe, direction not recorded), other
    device_id: int | None = None


@dataclass(frozen=True)
class OverlapTotals:
    """Sums of the `Overlap Analysis` track of one device (§3.7, §4.1), microseconds."""

    device_id: int | None
    computing_us: float = 0.0
    communication_us: float = 0.0
    communication_not_overlapped_us: float = 0.0
    free_us: float = 0.0
    lead_free_us: float = 0.0        # idle before the first compute/communication (start-up)
    tail_free_us: float = 0.0        # idle after the last one

    @property
    def active_free_us(self) -> float:
        """Free scoped to the busy span: whole-app runs start with seconds of idle (§4.1)."""
        return max(0.0, self.free_us - self.lead_free_us - self.tail_free_us)


@dataclass(frozen=True)
class TraceData:
    host_steps: tuple[HostStep, ...]
    memcpy: tuple[MemcpyTask, ...]
    overlaps: tuple[OverlapTotals, ...]
    events: int
    issues: tuple[Issue, ...] = ()


_OVERLAP = {"Computing": "computing_us", "Communication": "communication_us",
            "Communication(Not Overlapped)": "communication_not_overlapped_us", "Free": "free_us"}
_MEMCPY_OPERATIONS = {
    "host to device": "h2d", "host to device ex": "h2d", "device to host": "d2h", "device to host ex": "d2h",
    "device to device": "d2d", "addr device to device": "d2d",
}
_MEMCPY_QUEUES = {"PCIE_DMA_SQE": "h2d_d2h", "SDMA_SQE": "d2d"}
_NPU_LABEL = re.compile(r"^NPU\s*(\d+)$")


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
        self.first_free: tuple[float, float] | None = None   # (start, duration)
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
        return OverlapTotals(device, lead_free_us=lead, tail_free_us=tail, **self.sums)


class _TraceAcc:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.process_names: dict[object, str] = {}
        self.process_labels: dict[object, str] = {}
        self.host_steps: list[HostStep] = []
        self.memcpy: list[tuple[object, float, float, str]] = []
        self.overlap: dict[object, _OverlapAcc] = {}
        self.events = self.bad = self.dropped_memcpy = 0

    def add(self, event: Any) -> None:
        self.events += 1
        if not isinstance(event, dict) or not isinstance(event.get("pid"), (int, float, str, type(None))):
            self.bad += 1  # not an event, or a pid we could not use as a key
            return
        phase, name = event.get("ph"), event.get("name")
        if phase == "M":
            self._metadata(event, name)
        elif phase == "X" and isinstance(name, str):
            if name == "MEMCPY_ASYNC" or name.startswith("ProfilerStep#") or name in _OVERLAP:
                self._span(event, name)

    def _metadata(self, event: dict[str, Any], name: object) -> None:
        args = event.get("args")
        if not isinstance(args, dict):
            return
        if name == "process_name" and isinstance(args.get("name"), str):
            self.process_names[event.get("pid")] = args["name"]
        elif name == "process_labels" and isinstance(args.get("labels"), str):
            self.process_labels[event.get("pid")] = args["labels"]

    def _span(self, event: dict[str, Any], name: str) -> None:
        try:
            start, duration = float(event["ts"]), float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            self.bad += 1
            return
        if not (math.isfinite(start) and math.isfinite(duration) and duration >= 0.0):
            self.bad += 1
            return
        pid = event.get("pid")
        if name == "MEMCPY_ASYNC":
            if len(self.memcpy) >= self.limits.max_memcpy_events:
                self.dropped_memcpy += 1
                return
            args = _dict(event.get("args"))
            self.memcpy.append((pid, start, duration, memcpy_kind(args.get("Task Type"), args.get("operation"))))
        elif name.startswith("ProfilerStep#"):
            step = _int(name.removeprefix("ProfilerStep#"))
            if step is not None:
                self.host_steps.append(HostStep(step, start, duration))
        else:
            self.overlap.setdefault(pid, _OverlapAcc()).add(name, start, duration)

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
            issues.append(Issue("too_large", f"{name}: over {self.limits.max_memcpy_events} MEMCPY_ASYNC events; rest ignored"))
        memcpy = tuple(
            MemcpyTask(start, duration, kind, self._device(pid))
            for pid, start, duration, kind in self.memcpy if self._is(pid, "Ascend Hardware")
        )
        overlaps = tuple(
            acc.totals(self._device(pid)) for pid, acc in self.overlap.items() if self._is(pid, "Overlap Analysis")
        )
        steps = tuple(sorted(self.host_steps, key=lambda s: s.start_us))
        return TraceData(steps, memcpy, overlaps, self.events, tuple(issues))


def read_trace(handle: TextIO, name: str = "trace_view.json", limits: Limits = Limits()) -> TraceData:
    """Step spans, memory copies and Overlap Analysis sums from a Chrome trace (§3.7).

    A trace cut mid-way yields what was read before the cut, with a ``truncated`` issue.
    """
    acc, issues = _TraceAcc(limits), []
    try:
        for event in _trace_events(handle, name, limits):
            acc.add(event)
    except ProfileParseError as exc:
        if acc.events == 0:
            raise
        issues.append(Issue(exc.reason, f"{exc.message}; used the {acc.events} events before it"))
    return acc.result(issues, name)


def _trace_events(handle: TextIO, name: str, limits: Limits) -> Iterator[Any]:
    head = handle.read(1)
    while head and head in _WS:
        head = handle.read(1)
    if head == "{":  # {"traceEvents": [...]} layout: small enough files only
        text = head + handle.read(limits.max_json_bytes + 1)
        if len(text) > limits.max_json_bytes:
            raise ProfileParseError("too_large", f"{name}: object-style trace over {limits.max_json_bytes >> 20} MiB")
        events = _loads(text, name).get("traceEvents") if text else None
        if not isinstance(events, list):
            raise ProfileParseError("malformed", f"{name}: no traceEvents list")
        yield from events
        return
    yield from iter_json_array(_Prefixed(head, handle), name, max_item=limits.max_json_event_bytes)


class _Prefixed:
    """A handle with one already-read character put back in front."""

    def __init__(self, prefix: str, handle: TextIO) -> None:
        self.prefix, self.handle = prefix, handle

    def read(self, size: int = -1) -> str:
        text, self.prefix = self.prefix + self.handle.read(size), ""
        return text


def _loads(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ProfileParseError("malformed", f"{name}: JSON nested too deeply") from None
    except ValueError as exc:
        reason = "truncated" if _cut_short(text, exc) else "malformed"
        detail = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ProfileParseError(reason, f"{name}: not valid JSON ({detail})") from None


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


# --- JSON: small files loaded whole -----------------------------------------------------------


@dataclass(frozen=True)
class CommunicationStep:
    """communication.json summed over the ops of one step (§3.8), microseconds."""

    step: int | None
    elapse_us: float
    transit_us: float
    wait_us: float
    synchronization_us: float


def read_communication(text: str, name: str = "communication.json") -> tuple[CommunicationStep, ...]:
    data = _loads(text, name)
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
                            sums[i] += float(value) * 1000.0  # ms -> us (§2.1)
        out.append(CommunicationStep(_int(str(step_key).removeprefix("step")), *sums))
    return tuple(sorted(out, key=lambda s: (s.step is None, s.step or 0)))


@dataclass(frozen=True)
class ProfilerInfo:
    """profiler_info*.json (§1.1): written when collection stops."""

    rank: int | None
    level: str | None
    collection_end: float | None      # unix seconds ("end_info.collectionTimeEnd" is ns)


def read_profiler_info(text: str, name: str = "profiler_info.json") -> ProfilerInfo:
    data = _loads(text, name)
    if not isinstance(data, dict):
        raise ProfileParseError("malformed", f"{name}: expected a JSON object")
    experimental = _dict(_dict(data.get("config")).get("experimental_config"))
    end = _dict(data.get("end_info"))
    rank = _int(data.get("rank_id"))
    end_ns = _int(end.get("collectionTimeEnd"))
    level = experimental.get("_profiler_level")
    return ProfilerInfo(
        rank=rank if rank is not None and rank >= 0 else None,
        level=level if isinstance(level, str) else None,
        collection_end=end_ns / 1e9 if end_ns else None,
    )


_JOB_KEYS = ("job_name", "jobname", "job", "job_id", "model_name", "task_name")


def read_job_name(text: str, name: str = "profiler_metadata.json") -> str | None:
    """A job name the user stored with `prof.add_metadata(...)`, if any."""
    data = _loads(text, name)
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in _JOB_KEYS:
        value = lowered.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def _read_small_json(path: Path, reader: Callable[[str, str], Any], limits: Limits) -> Any:
    _check_size(path, limits.max_json_bytes)
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None
    if not text.strip():
        raise ProfileParseError("empty", f"{path.name}: empty file")
    return reader(text, path.name)


# --- one profile directory -------------------------------------------------------------------

PRODUCERS = ("torch_npu", "mindspore", "msprof", "cluster")


@dataclass(frozen=True)
class ProfileData:
    """Everything parsed for one rank of one export."""

    path: str
    producer: str
    job_name: str
    rank: int | None = None
    device_id: int | None = None
    level: str | None = None
    finished_at: float | None = None
    steps: tuple[StepTime, ...] = ()
    kernels: KernelTable | None = None
    op_statistic: OpStatistic | None = None
    trace: TraceData | None = None
    task_time: TaskTime | None = None
    iterations: tuple[Iteration, ...] = ()
    api: tuple[ApiStat, ...] = ()
    communication: tuple[CommunicationStep, ...] = ()
    issues: tuple[Issue, ...] = ()


def producer_of(path: Path) -> str | None:
    """msprof-analyze's rule (§1.4): by directory name."""
    name = path.name
    if name.endswith("_ascend_pt"):
        return "torch_npu"
    if name.endswith("_ascend_ms"):
        return "mindspore"
    if name.startswith("PROF_"):
        return "msprof"
    if (path / "cluster_step_trace_time.csv").is_file():
        return "cluster"
    return None


def output_dir(path: Path, producer: str) -> Path:
    """Where the parsed deliverables are."""
    if producer in ("torch_npu", "mindspore"):
        return path / "ASCEND_PROFILER_OUTPUT"
    if producer == "msprof":
        return path / "mindstudio_profiler_output"
    return path


def load_profile(path: Path, producer: str, job_name: str, limits: Limits = Limits()) -> tuple[ProfileData, ...]:
    """Parse one export; a file that fails becomes an Issue, the rest is still used.

    One ProfileData per rank (a cluster file holds several). Raises ProfileParseError
    ("no_data") when nothing usable was found.
    """
    if producer == "cluster":
        return _load_cluster(path, job_name, limits)
    loader = _load_msprof if producer == "msprof" else _load_framework
    data = loader(path, producer, job_name, limits)
    if not (data.steps or (data.kernels and data.kernels.steps) or (data.op_statistic and data.op_statistic.op_types)
            or (data.trace and data.trace.overlaps)):
        problems = "; ".join(i.message for i in data.issues) or "no step_trace_time, kernel_details, op_statistic or timeline found"
        if not data.issues and any(output_dir(path, producer).glob("*.db")):
            raise ProfileParseError("unsupported", f"{path.name}: only a DB export (.db) was found; text export (csv/json) is needed")
        raise ProfileParseError("no_data", f"{path.name}: no usable profile data: {problems}")
    return (data,)


class _Collect:
    """Runs file parsers, turning each failure into an Issue."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def run(self, parse: Callable[[], Any]) -> Any:
        try:
            result = parse()
        except ProfileParseError as exc:
            self.issues.append(Issue(exc.reason, exc.message))
            return None
        self.issues.extend(getattr(result, "issues", ()) or ())
        return result


def _file(directory: Path, name: str) -> Path | None:
    path = directory / name
    return path if path.is_file() else None


def _load_framework(path: Path, producer: str, job_name: str, limits: Limits) -> ProfileData:
    out, collect = output_dir(path, producer), _Collect()
    info = _profiler_info(path, collect, limits)
    meta = _file(path, "profiler_metadata.json")
    job = collect.run(lambda: _read_small_json(meta, read_job_name, limits)) if meta else None
    steps = _file(out, "step_trace_time.csv")
    kernels = _file(out, "kernel_details.csv")
    op_stat = _file(out, "op_statistic.csv")
    trace = _file(out, "trace_view.json")
    comm = _file(out, "communication.json")
    api = _file(out, "api_statistic.csv")
    step_table = collect.run(lambda: _read_csv(steps, read_step_trace, limits)) if steps else None
    kernel_table = collect.run(lambda: _read_csv(kernels, read_kernels, limits)) if kernels else None
    trace_data = collect.run(lambda: _read_trace(trace, limits)) if trace else None
    api_table = collect.run(lambda: _read_csv(api, read_api_statistic, limits)) if api else None
    data = ProfileData(
        path=str(path), producer=producer, job_name=job or job_name,
        rank=info.rank if info and info.rank is not None else _rank_from_name(path),
        level=info.level if info else None,
        finished_at=(info.collection_end if info else None) or _newest_mtime(out),
        steps=step_table.rows if step_table else (),
        kernels=kernel_table,
        op_statistic=collect.run(lambda: _read_csv(op_stat, read_op_statistic, limits)) if op_stat else None,
        trace=trace_data,
        api=api_table.items if api_table else (),
        communication=(collect.run(lambda: _read_small_json(comm, read_communication, limits)) or ()) if comm else (),
    )
    device = next((r.device_id for r in data.steps if r.device_id is not None), None)
    device = device if device is not None else (kernel_table.device_id if kernel_table else None)
    return replace(data, device_id=device, issues=tuple(collect.issues))


def _profiler_info(path: Path, collect: _Collect, limits: Limits) -> ProfilerInfo | None:
    candidates = sorted(path.glob("profiler_info*.json"))
    if not candidates:
        return None
    info = collect.run(lambda: _read_small_json(candidates[0], read_profiler_info, limits))
    if info is not None and info.rank is None:
        suffix = _int(candidates[0].stem.removeprefix("profiler_info").lstrip("_"))
        info = replace(info, rank=suffix)
    return info


_RANK_IN_NAME = re.compile(r"(?:^|[_-])rank[_-]?(\d+)(?:[_-]|$)", re.IGNORECASE)


def _rank_from_name(path: Path) -> int | None:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _read_trace(path: Path, limits: Limits) -> TraceData:
    _check_size(path, limits.max_trace_bytes)
    try:
        handle = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None
    with handle:
        try:
            return read_trace(handle, path.name, limits)
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None


_SLICE = re.compile(r"_slice_(\d+)")


def _slices(directory: Path, prefix: str, suffix: str = ".csv") -> list[Path]:
    """`op_summary_*.csv` incl. `op_summary_slice_N_*.csv`, in slice order (§1.3)."""
    def order(p: Path) -> tuple[int, str]:
        match = _SLICE.search(p.name)
        return (int(match.group(1)) if match else -1, p.name)

    found = [p for p in directory.glob(f"{prefix}_*{suffix}") if p.is_file()]
    return sorted(found, key=order)


def _load_msprof(path: Path, producer: str, job_name: str, limits: Limits) -> ProfileData:
    out, collect = output_dir(path, producer), _Collect()

    def each(prefix: str, reader: Callable[[Iterable[str], str], Any]) -> list[Any]:
        """Parse every slice of one kind; failed slices become issues."""
        results = (collect.run(partial(_read_csv, p, reader, limits)) for p in _slices(out, prefix))
        return [r for r in results if r is not None]

    kernels = merge_kernel_tables(each("op_summary", read_kernels))
    op_stats: list[OpStatistic] = each("op_statistic", read_op_statistic)
    op_stat = OpStatistic(_merge_op_types(o for t in op_stats for o in t.op_types), op_stats[0].device_id) if op_stats else None
    tasks: list[TaskTime] = each("task_time", read_task_time)
    traces = [t for t in (collect.run(partial(_read_trace, p, limits)) for p in _slices(out, "msprof", ".json")) if t]
    iterations = [i for table in each("step_trace", read_msprof_step_trace) for i in table.items]
    api = [a for table in each("api_statistic", read_api_statistic) for a in table.items]
    trace = merge_traces(traces)
    device = next((d for d in (kernels.device_id if kernels else None, op_stat.device_id if op_stat else None,
                               tasks[0].device_id if tasks else None) if d is not None), None)
    return ProfileData(
        path=str(path), producer=producer, job_name=job_name, rank=device, device_id=device,
        finished_at=_newest_mtime(out),
        kernels=kernels, op_statistic=op_stat, trace=_one_device(trace, device),
        task_time=_merge_task_times(tasks), iterations=tuple(iterations),
        api=tuple(sorted(api, key=lambda a: (-a.time_us, a.api))),
        issues=tuple(collect.issues),
    )


def _one_device(trace: TraceData | None, device: int | None) -> TraceData | None:
    """msprof timelines may hold several devices; keep the one the CSVs describe."""
    if trace is None or len(trace.overlaps) <= 1:
        return trace
    chosen = [o for o in trace.overlaps if o.device_id == device] or [trace.overlaps[0]]
    keep = chosen[0].device_id
    return replace(trace, overlaps=(chosen[0],), memcpy=tuple(m for m in trace.memcpy if m.device_id in (keep, None)))


def _merge_task_times(parts: list[TaskTime]) -> TaskTime | None:
    if not parts:
        return None
    totals: dict[str, float] = {}
    for part in parts:
        for kind, value in part.by_type_us.items():
            totals[kind] = totals.get(kind, 0.0) + value
    return TaskTime(_frozen_map(totals), sum(p.memcpy_us for p in parts), parts[0].device_id)


def _load_cluster(path: Path, job_name: str, limits: Limits) -> tuple[ProfileData, ...]:
    table = _read_csv(path / "cluster_step_trace_time.csv", read_step_trace, limits)
    ranks: dict[int | None, list[StepTime]] = {}
    for row in table.rows:
        ranks.setdefault(row.rank, []).append(row)
    if not ranks:
        raise ProfileParseError("no_data", f"{path.name}: cluster_step_trace_time.csv has no rank rows")
    finished = _newest_mtime(path)
    return tuple(
        ProfileData(str(path), "cluster", job_name, rank=rank, finished_at=finished, steps=tuple(rows), issues=table.issues)
        for rank, rows in sorted(ranks.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    )


def _newest_mtime(directory: Path) -> float | None:
    try:
        with os.scandir(directory) as entries:
            times = [e.stat().st_mtime for e in entries if e.is_file()]
    except OSError:
        return None
    return max(times, default=None)


# --- derived indicators (FORMATS.md §5) ------------------------------------------------------


@dataclass(frozen=True)
class OperatorShare:
    op_type: str
    time_us: float
    count: int
    ratio: float                     # of total device kernel time, communication excluded


@dataclass(frozen=True)
class ProfileSummary:
    """The tuning guide's micro-level indicators for one rank over a window of steps.

    Step shares are over the device step time E2E = Computing + Communication(Not
    Overlapped) + Free; operator shares over total device kernel time without HCCL.
    ``None``: the export holds nothing to compute it from (never 0 for "unknown").
    """

    job_name: str
    rank: int | None
    path: str
    producer: str
    steps: tuple[int, ...] = ()                          # step ids in the window; () whole capture
    step_count: int = 0
    finished_at: float | None = None                     # unix time the export was produced
    device_id: int | None = None
    level: str | None = None
    step_duration_seconds: float | None = None           # mean E2E per step
    compute_ratio: float | None = None                   # Computing / E2E
    communication_ratio: float | None = None             # Communication(Not Overlapped) / E2E
    idle_ratio: float | None = None                      # Free / E2E
    memcpy_ratio: float | None = None                    # MEMCPY_ASYNC time / E2E
    memcpy_kind_ratios: tuple[tuple[str, float], ...] = ()
    framework_overhead_ratio: float | None = None        # Preparing / (Preparing + E2E)
    top3_operator_ratio: float | None = None
    max_operator_ratio: float | None = None              # the largest operator type
    top_operators: tuple[OperatorShare, ...] = ()
    kernel_time_seconds: float | None = None             # per step, communication excluded
    longest_kernel: str | None = None
    longest_kernel_seconds: float | None = None
    communication_wait_ratio: float | None = None        # wait / (wait + transit), communication.json
    operator_source: str | None = None                   # kernel_details, op_summary, op_statistic
    issues: tuple[str, ...] = ()


def summarize(data: ProfileData, top_k: int = 5, per_step: bool = False) -> tuple[ProfileSummary, ...]:
    """The window of all steps first; then, with ``per_step``, one summary per step."""
    step_ids = _step_ids(data)
    windows: list[tuple[int, ...] | None] = [None]
    if per_step and len(step_ids) > 1:
        windows += [(s,) for s in step_ids]
    return tuple(_summary(data, window, top_k) for window in windows)


def _step_ids(data: ProfileData) -> tuple[int, ...]:
    ids = {r.step for r in data.steps if r.step is not None}
    if not ids and data.kernels:
        ids = {s.step for s in data.kernels.steps if s.step is not None}
    return tuple(sorted(ids))


@dataclass(frozen=True)
class _StepTimes:
    count: int
    computing: float
    not_overlapped: float
    free: float
    preparing: float | None

    @property
    def e2e(self) -> float:
        return self.computing + self.not_overlapped + self.free


def _step_times(data: ProfileData, window: tuple[int, ...] | None) -> _StepTimes | None:
    rows = [r for r in data.steps if window is None or r.step in window]
    if rows:
        preparing = [r.preparing_us for r in rows]
        return _StepTimes(
            len(rows), sum(r.computing_us for r in rows), sum(r.communication_not_overlapped_us for r in rows),
            sum(r.free_us for r in rows), None if None in preparing else sum(p or 0.0 for p in preparing),
        )
    overlap = data.trace.overlaps[0] if data.trace and data.trace.overlaps and window is None else None
    if overlap is None:
        return None
    # msprof whole capture: the busy span only; graph mode iterations divide it into steps.
    return _StepTimes(max(1, len(data.iterations)), overlap.computing_us, overlap.communication_not_overlapped_us,
                      overlap.active_free_us, None)


def _summary(data: ProfileData, window: tuple[int, ...] | None, top_k: int) -> ProfileSummary:
    times = _step_times(data, window)
    e2e = times.e2e if times and times.e2e > 0 else None
    ops, op_source, kernel_us, longest = _operators(data, window)
    total_ops = sum(o.total_us for o in ops)
    shares = tuple(OperatorShare(o.op_type, o.total_us, o.count, o.total_us / total_ops) for o in ops) if total_ops > 0 else ()
    memcpy = _memcpy(data, window)
    steps = window if window is not None else _step_ids(data)
    return ProfileSummary(
        job_name=data.job_name, rank=data.rank, path=data.path, producer=data.producer,
        steps=tuple(steps), step_count=times.count if times else len(steps),
        finished_at=data.finished_at, device_id=data.device_id, level=data.level,
        step_duration_seconds=e2e / times.count * US if e2e and times else None,
        compute_ratio=_ratio(times.computing if times else None, e2e),
        communication_ratio=_ratio(times.not_overlapped if times else None, e2e),
        idle_ratio=_ratio(times.free if times else None, e2e),
        memcpy_ratio=_ratio(sum(memcpy.values()), e2e) if memcpy is not None else None,
        memcpy_kind_ratios=tuple((k, v / e2e) for k, v in sorted(memcpy.items())) if memcpy and e2e else (),
        framework_overhead_ratio=_framework(data, times),
        top3_operator_ratio=sum(s.ratio for s in shares[:3]) if shares else None,
        max_operator_ratio=shares[0].ratio if shares else None,
        top_operators=shares[:top_k],
        kernel_time_seconds=kernel_us / max(1, len(steps)) * US if kernel_us is not None else None,
        longest_kernel=longest[0] if longest else None,
        longest_kernel_seconds=longest[1] * US if longest else None,
        communication_wait_ratio=_comm_wait(data, window),
        operator_source=op_source if shares else None,
        issues=tuple(i.message for i in data.issues),
    )


def _ratio(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _operators(data: ProfileData, window: tuple[int, ...] | None) -> tuple[tuple[OpTypeTime, ...], str | None, float | None, tuple[str, float] | None]:
    """Op types for the window: kernel rows of its steps, else of the whole file, else op_statistic."""
    if data.kernels and data.kernels.steps:
        steps = list(data.kernels.steps)
        if window is not None and any(s.step is not None for s in steps):
            steps = [s for s in steps if s.step in window]  # a step without kernels has no op shares
        ops = _merge_op_types(o for s in steps for o in s.op_types)
        longest = max((s for s in steps if s.longest_us is not None), key=lambda s: s.longest_us or 0.0, default=None)
        source = "op_summary" if data.producer == "msprof" else "kernel_details"
        pick = (longest.longest_name or "", longest.longest_us or 0.0) if longest else None
        return ops, source, sum(s.compute_us for s in steps) if steps else None, pick
    if data.op_statistic and data.op_statistic.op_types:
        ops = data.op_statistic.op_types
        return ops, "op_statistic", None, None
    return (), None, None, None


def _memcpy(data: ProfileData, window: tuple[int, ...] | None) -> dict[str, float] | None:
    """Copy time by kind in the window; None when the export has no source for it."""
    if data.trace is not None:
        if window is not None and not data.trace.host_steps:
            return None  # no step boundaries: copies cannot be split by step
        tasks = _in_window(data.trace, window)
        sums: dict[str, float] = {}
        for task in tasks:
            sums[task.kind] = sums.get(task.kind, 0.0) + task.duration_us
        return sums
    if data.task_time is not None and window is None:
        return {"other": data.task_time.memcpy_us} if data.task_time.memcpy_us else {}
    return None


def _in_window(trace: TraceData, window: tuple[int, ...] | None) -> list[MemcpyTask]:
    """A copy belongs to the host step whose span started last before it (§5 memcpy share)."""
    steps = trace.host_steps
    if not steps:
        return list(trace.memcpy)
    wanted = None if window is None else set(window)
    starts = [s.start_us for s in steps]
    out = []
    for task in trace.memcpy:
        index = bisect_right(starts, task.start_us) - 1
        if index >= 0 and (wanted is None or steps[index].step in wanted):
            out.append(task)
    return out


def _framework(data: ProfileData, times: _StepTimes | None) -> float | None:
    if times and times.preparing is not None and times.preparing + times.e2e > 0:
        return times.preparing / (times.preparing + times.e2e)
    iterations = [i for i in data.iterations if i.data_aug_bound_us is not None]
    total = sum(i.iteration_us for i in iterations)
    if iterations and total > 0:
        return sum(i.data_aug_bound_us or 0.0 for i in iterations) / total
    return None


def _comm_wait(data: ProfileData, window: tuple[int, ...] | None) -> float | None:
    steps = [c for c in data.communication if window is None or c.step in window]
    wait, transit = sum(c.wait_us for c in steps), sum(c.transit_us for c in steps)
    return wait / (wait + transit) if wait + transit > 0 else None


# --- (de)serialisation for the state file and --json ------------------------------------------


def summary_to_dict(summary: ProfileSummary) -> dict[str, Any]:
    data = asdict(summary)
    data["steps"] = list(summary.steps)
    data["memcpy_kind_ratios"] = dict(summary.memcpy_kind_ratios)
    data["issues"] = list(summary.issues)
    return data


def summary_from_dict(data: Mapping[str, Any]) -> ProfileSummary:
    """Inverse of summary_to_dict; raises ProfileParseError on anything unexpected."""
    try:
        known = {f.name for f in fields(ProfileSummary)}
        values = {k: v for k, v in data.items() if k in known}
        values["steps"] = tuple(int(s) for s in values.get("steps", ()))
        values["memcpy_kind_ratios"] = tuple((str(k), float(v)) for k, v in dict(values.get("memcpy_kind_ratios", {})).items())
        values["top_operators"] = tuple(OperatorShare(**o) for o in values.get("top_operators", ()))
        values["issues"] = tuple(str(i) for i in values.get("issues", ()))
        return ProfileSummary(**values)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ProfileParseError("malformed", f"bad stored summary: {exc}") from None


__all__ = [
    "ApiStat", "ApiStatistic", "CommunicationStep", "IterationTable", "Issue", "Iteration", "KernelTable", "Limits", "MemcpyTask", "OpStatistic",
    "OpTypeTime", "OperatorShare", "OverlapTotals", "PRODUCERS", "ProfileData", "ProfileParseError",
    "ProfileSummary", "ProfilerInfo", "StepKernels", "StepTime", "StepTraceTable", "TaskTime", "TraceData",
    "iter_json_array", "load_profile", "memcpy_kind", "merge_kernel_tables", "merge_traces", "op_type_from_name",
    "output_dir", "producer_of", "read_api_statistic", "read_communication", "read_job_name", "read_kernels",
    "read_msprof_step_trace", "read_op_statistic", "read_profiler_info", "read_step_trace", "read_task_time",
    "read_trace", "summarize", "summary_from_dict", "summary_to_dict",
]
