"""The health-table indicators (docs/tuning.md) of one rank, derived from its ProfileData.

Quoted section names refer to docs/formats/profiler-exports.md.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from exporter.profiles.formats.common import US
from exporter.profiles.formats.tables import OpTypeTime, merge_op_types
from exporter.profiles.formats.trace import MemcpyTask, TraceData
from exporter.profiles.load import ProfileData

# --- derived indicators (docs/formats/profiler-exports.md, "Derived indicators") ---------------------------


@dataclass(frozen=True)
class OperatorShare:
    op_type: str
    time_us: float
    count: int
    ratio: float  # of total device kernel time, communication excluded


@dataclass(frozen=True)
class ProfileSummary:
    """The profile's health-table indicators (docs/tuning.md) for one rank over a window of steps.

    Step shares are over the device step time E2E = Computing + Communication(Not
    Overlapped) + Free; operator shares over total device kernel time without HCCL.
    ``None``: the export holds nothing to compute it from (never 0 for "unknown").
    """

    job_name: str
    rank: int | None
    path: str
    producer: str
    steps: tuple[int, ...] = ()  # step ids in the window; () whole capture
    step_count: int = 0
    finished_at: float | None = None  # unix time the export was produced
    device_id: int | None = None
    level: str | None = None
    step_duration_seconds: float | None = None  # mean E2E per step
    compute_ratio: float | None = None  # Computing / E2E
    communication_ratio: float | None = None  # Communication(Not Overlapped) / E2E
    idle_ratio: float | None = None  # Free / E2E
    memcpy_ratio: float | None = None  # MEMCPY_ASYNC time / E2E
    memcpy_kind_ratios: tuple[tuple[str, float], ...] = ()
    framework_overhead_ratio: float | None = None  # Preparing / (Preparing + E2E)
    top3_operator_ratio: float | None = None
    max_operator_ratio: float | None = None  # the largest operator type
    top_operators: tuple[OperatorShare, ...] = ()
    kernel_time_seconds: float | None = None  # per step, communication excluded
    longest_kernel: str | None = None
    longest_kernel_seconds: float | None = None
    communication_wait_ratio: float | None = None  # wait / (wait + transit), communication.json
    operator_source: str | None = None  # kernel_details, op_summary, op_statistic
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
            len(rows),
            sum(r.computing_us for r in rows),
            sum(r.communication_not_overlapped_us for r in rows),
            sum(r.free_us for r in rows),
            None if None in preparing else sum(p or 0.0 for p in preparing),
        )
    overlap = data.trace.overlaps[0] if data.trace and data.trace.overlaps and window is None else None
    if overlap is None:
        return None
    # msprof whole capture: the busy span only; graph mode iterations divide it into steps.
    return _StepTimes(
        max(1, len(data.iterations)), overlap.computing_us, overlap.communication_not_overlapped_us, overlap.active_free_us, None
    )


def _summary(data: ProfileData, window: tuple[int, ...] | None, top_k: int) -> ProfileSummary:
    times = _step_times(data, window)
    e2e = times.e2e if times and times.e2e > 0 else None
    ops, op_source, kernel_us, longest = _operators(data, window)
    total_ops = sum(o.total_us for o in ops)
    shares = tuple(OperatorShare(o.op_type, o.total_us, o.count, o.total_us / total_ops) for o in ops) if total_ops > 0 else ()
    memcpy = _memcpy(data, window)
    steps = window if window is not None else _step_ids(data)
    return ProfileSummary(
        job_name=data.job_name,
        rank=data.rank,
        path=data.path,
        producer=data.producer,
        steps=tuple(steps),
        step_count=times.count if times else len(steps),
        finished_at=data.finished_at,
        device_id=data.device_id,
        level=data.level,
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


def _operators(
    data: ProfileData, window: tuple[int, ...] | None
) -> tuple[tuple[OpTypeTime, ...], str | None, float | None, tuple[str, float] | None]:
    """Op types for the window: kernel rows of its steps, else of the whole file, else op_statistic."""
    if data.kernels and data.kernels.steps:
        steps = list(data.kernels.steps)
        if window is not None and any(s.step is not None for s in steps):
            steps = [s for s in steps if s.step in window]  # a step without kernels has no op shares
        ops = merge_op_types(o for s in steps for o in s.op_types)
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
    """A copy belongs to the host step whose span started last before it ("Memory-copy share and kinds")."""
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
