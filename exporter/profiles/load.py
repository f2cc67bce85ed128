"""One export directory -> ProfileData: which files each producer writes, and reading them
with every failing file turned into an Issue while the rest is still used.
Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from exporter.profiles.formats.budget import Budget
from exporter.profiles.formats.common import (
    Issue,
    Limits,
    ProfileParseError,
    as_int,
    frozen_map,
    open_file,
)
from exporter.profiles.formats.csvtable import read_csv
from exporter.profiles.formats.info import (
    CommunicationStep,
    ProfilerInfo,
    read_communication,
    read_job_name,
    read_json_file,
    read_profiler_info,
)
from exporter.profiles.formats.tables import (
    ApiStat,
    Iteration,
    KernelTable,
    OpStatistic,
    StepTime,
    TaskTime,
    merge_kernel_tables,
    merge_op_types,
    read_api_statistic,
    read_kernels,
    read_msprof_step_trace,
    read_op_statistic,
    read_step_trace,
    read_task_time,
)
from exporter.profiles.formats.trace import TraceData, merge_traces, read_trace
from exporter.profiles.layout import output_dir


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


def load_profile(path: Path, producer: str, job_name: str, limits: Limits = Limits()) -> tuple[ProfileData, ...]:
    """Parse one export; a file that fails becomes an Issue, the rest is still used.

    One ProfileData per rank (a cluster file holds several). Raises ProfileParseError
    ("no_data") when nothing usable was found, ("cpu_budget") when parsing it took more than
    ``limits.max_export_work``. What its files make us hold counts against
    ``limits.max_export_memory`` as they are read (formats/budget.py).
    """
    budget = Budget.of(limits)
    if producer == "cluster":
        with budget.reading("cluster_step_trace_time.csv"):
            return _load_cluster(path, job_name, limits, budget)
    loader = _load_msprof if producer == "msprof" else _load_framework
    data = loader(path, producer, job_name, limits, budget)
    if not (
        data.steps
        or (data.kernels and data.kernels.steps)
        or (data.op_statistic and data.op_statistic.op_types)
        or (data.trace and data.trace.overlaps)
    ):
        problems = "; ".join(i.message for i in data.issues) or "no step_trace_time, kernel_details, op_statistic or timeline found"
        if not data.issues and any(output_dir(path, producer).glob("*.db")):
            raise ProfileParseError("unsupported", f"{path.name}: only a DB export (.db) was found; text export (csv/json) is needed")
        raise ProfileParseError("no_data", f"{path.name}: no usable profile data: {problems}", data.issues)
    return (data,)


class _Collect:
    """Runs file parsers against the export's budget, turning each failure into an Issue; a
    spent work budget refuses the whole export (``cpu_budget``, with the issues so far)."""

    def __init__(self, budget: Budget) -> None:
        self.issues: list[Issue] = []
        self.budget = budget

    def run(self, path: Path, parse: Callable[[], Any]) -> Any:
        try:
            with self.budget.reading(path.name):
                result = parse()
        except ProfileParseError as exc:
            if exc.reason == "cpu_budget":
                raise ProfileParseError(exc.reason, exc.message, tuple(self.issues)) from None
            self.issues.append(Issue(exc.reason, exc.message))
            return None
        self.issues.extend(getattr(result, "issues", ()) or ())
        return result


def _present(path: Path) -> bool:
    """Something other than a directory is there (a FIFO or a dangling link too: opening it
    says why it is refused); never raises, so an unreadable directory costs its files only."""
    return os.path.lexists(path) and not os.path.isdir(path)


def _file(directory: Path, name: str) -> Path | None:
    path = directory / name
    return path if _present(path) else None


def _load_framework(path: Path, producer: str, job_name: str, limits: Limits, budget: Budget) -> ProfileData:
    out, collect = output_dir(path, producer), _Collect(budget)
    info = _profiler_info(path, collect, limits)
    meta = _file(path, "profiler_metadata.json")
    job = collect.run(meta, lambda: read_json_file(meta, read_job_name, limits, limits.max_info_bytes, True, budget)) if meta else None
    steps = _file(out, "step_trace_time.csv")
    kernels = _file(out, "kernel_details.csv")
    op_stat = _file(out, "op_statistic.csv")
    trace = _file(out, "trace_view.json")
    comm = _file(out, "communication.json")
    api = _file(out, "api_statistic.csv")
    step_table = collect.run(steps, lambda: read_csv(steps, read_step_trace, limits, budget)) if steps else None
    kernel_table = collect.run(kernels, lambda: read_csv(kernels, read_kernels, limits, budget)) if kernels else None
    trace_data = collect.run(trace, lambda: _read_trace(trace, limits, budget)) if trace else None
    api_table = collect.run(api, lambda: read_csv(api, read_api_statistic, limits, budget)) if api else None
    data = ProfileData(
        path=str(path),
        producer=producer,
        job_name=job or job_name,
        rank=info.rank if info and info.rank is not None else _rank_from_name(path),
        level=info.level if info else None,
        finished_at=(info.collection_end if info else None) or newest_mtime(out),
        steps=step_table.rows if step_table else (),
        kernels=kernel_table,
        op_statistic=collect.run(op_stat, lambda: read_csv(op_stat, read_op_statistic, limits, budget)) if op_stat else None,
        trace=trace_data,
        api=api_table.rows if api_table else (),
        communication=(collect.run(comm, lambda: read_json_file(comm, read_communication, limits, budget=budget)) or ()) if comm else (),
    )
    device = next((r.device_id for r in data.steps if r.device_id is not None), None)
    device = device if device is not None else (kernel_table.device_id if kernel_table else None)
    return replace(data, device_id=device, issues=tuple(collect.issues))


def _profiler_info(path: Path, collect: _Collect, limits: Limits) -> ProfilerInfo | None:
    candidates = sorted(path.glob("profiler_info*.json"))
    if not candidates:
        return None
    info: ProfilerInfo | None = collect.run(
        candidates[0], lambda: read_json_file(candidates[0], read_profiler_info, limits, limits.max_info_bytes, True, collect.budget)
    )
    if info is not None and info.rank is None:
        suffix = as_int(candidates[0].stem.removeprefix("profiler_info").lstrip("_"))
        info = replace(info, rank=suffix)
    return info


_RANK_IN_NAME = re.compile(r"(?:^|[_-])rank[_-]?(\d+)(?:[_-]|$)", re.IGNORECASE)


def _rank_from_name(path: Path) -> int | None:
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _read_trace(path: Path, limits: Limits, budget: Budget) -> TraceData:
    with open_file(path, limits.max_trace_bytes, limits) as handle:
        try:
            return read_trace(handle, path.name, limits, budget)
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None


_SLICE = re.compile(r"_slice_(\d+)")


def _slices(directory: Path, prefix: str, suffix: str = ".csv") -> list[Path]:
    """`op_summary_*.csv` incl. `op_summary_slice_N_*.csv`, in slice order ("msprof")."""

    def order(p: Path) -> tuple[int, str]:
        match = _SLICE.search(p.name)
        return (int(match.group(1)) if match else -1, p.name)

    found = [p for p in directory.glob(f"{prefix}_*{suffix}") if _present(p)]
    return sorted(found, key=order)


def _load_msprof(path: Path, producer: str, job_name: str, limits: Limits, budget: Budget) -> ProfileData:
    out, collect = output_dir(path, producer), _Collect(budget)

    def each(prefix: str, reader: Callable[[Iterable[str], str, Budget | None], Any]) -> list[Any]:
        """Parse every slice of one kind; failed slices become issues."""
        results = (collect.run(p, partial(read_csv, p, reader, limits, budget)) for p in _slices(out, prefix))
        return [r for r in results if r is not None]

    kernels = merge_kernel_tables(each("op_summary", read_kernels))
    op_stats: list[OpStatistic] = each("op_statistic", read_op_statistic)
    op_stat = OpStatistic(merge_op_types(o for t in op_stats for o in t.op_types), op_stats[0].device_id) if op_stats else None
    tasks: list[TaskTime] = each("task_time", read_task_time)
    traces = [t for t in (collect.run(p, partial(_read_trace, p, limits, budget)) for p in _slices(out, "msprof", ".json")) if t]
    iterations = [i for table in each("step_trace", read_msprof_step_trace) for i in table.rows]
    api = [a for table in each("api_statistic", read_api_statistic) for a in table.rows]
    trace = merge_traces(traces)
    device = next(
        (
            d
            for d in (kernels.device_id if kernels else None, op_stat.device_id if op_stat else None, tasks[0].device_id if tasks else None)
            if d is not None
        ),
        None,
    )
    return ProfileData(
        path=str(path),
        producer=producer,
        job_name=job_name,
        rank=device,
        device_id=device,
        finished_at=newest_mtime(out),
        kernels=kernels,
        op_statistic=op_stat,
        trace=_one_device(trace, device),
        task_time=_merge_task_times(tasks),
        iterations=tuple(iterations),
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
    return TaskTime(frozen_map(totals), sum(p.memcpy_us for p in parts), parts[0].device_id)


def _load_cluster(path: Path, job_name: str, limits: Limits, budget: Budget) -> tuple[ProfileData, ...]:
    table = read_csv(path / "cluster_step_trace_time.csv", read_step_trace, limits, budget)
    ranks: dict[int | None, list[StepTime]] = {}
    for row in table.rows:
        ranks.setdefault(row.rank, []).append(row)
    if not ranks:
        raise ProfileParseError("no_data", f"{path.name}: cluster_step_trace_time.csv has no rank rows")
    finished = newest_mtime(path)
    return tuple(
        ProfileData(str(path), "cluster", job_name, rank=rank, finished_at=finished, steps=tuple(rows), issues=table.issues)
        for rank, rows in sorted(ranks.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    )


def newest_mtime(directory: Path) -> float | None:
    try:
        with os.scandir(directory) as entries:
            times = [e.stat().st_mtime for e in entries if e.is_file()]
    except OSError:
        return None
    return max(times, default=None)
