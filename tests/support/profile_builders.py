"""Synthetic exports with known shares, in the real files' layouts and headers."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

STEP_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing"
)
# Level1 kernel_details header up to the first PMU column (real files have more after it).
KERNEL_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
    "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes"
)
OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim"
)
EPOCH = 1736408883000000.0  # us


@dataclass(frozen=True)
class Step:
    step: int
    computing: float
    not_overlapped: float
    free: float
    preparing: float = 0.0


@dataclass(frozen=True)
class Kernel:
    step: int
    name: str
    op_type: str
    core: str
    duration: float


@dataclass(frozen=True)
class Copy:
    start: float  # us after EPOCH
    duration: float
    queue: str = "PCIE_DMA_SQE"
    operation: str | None = None


def step_trace_csv(steps: Iterable[Step], newline: str = "\r\n") -> str:
    rows = [STEP_HEADER]
    for s in steps:
        e2e = s.computing + s.not_overlapped + s.free
        rows.append(f"{s.step},{s.computing},{s.not_overlapped},0,{s.not_overlapped},{s.free},{e2e},0,{s.not_overlapped},{s.preparing}")
    return newline.join(rows) + newline


def kernel_csv(kernels: Iterable[Kernel], newline: str = "\r\n") -> str:
    rows = [KERNEL_HEADER]
    for i, k in enumerate(kernels):
        task = "N/A" if k.core == "HCCL" else str(1000 + i)
        rows.append(
            f"{k.step},4294967295,{task},2,{k.name},{k.op_type},dynamic,{k.core},"
            f'{EPOCH + i * 10:.3f}\t,{k.duration},1.0,8,0,NO,"""32,3,224,224"""'
        )
    return newline.join(rows) + newline


def trace_json(host_steps: Sequence[tuple[int, float, float]], copies: Iterable[Copy]) -> str:
    """A torch_npu trace_view.json: Python track with ProfilerStep#N, Ascend Hardware copies."""
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"name": "process_name", "pid": 2, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}},
        {"name": "process_labels", "pid": 2, "tid": 0, "ph": "M", "args": {"labels": "NPU"}},
        {"name": "process_name", "pid": 3, "tid": 0, "ph": "M", "args": {"name": "HCCL"}},
        # an HCCL-internal copy: not a MEMCPY_ASYNC task, must not count
        {"name": "Memcpy", "pid": 3, "tid": 1, "ts": f"{EPOCH + 1:.3f}", "dur": 999.0, "ph": "X", "args": {}},
    ]
    for step, start, duration in host_steps:
        events.append(
            {
                "ph": "X",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": f"{EPOCH + start:.3f}",
                "dur": duration,
                "cat": "cpu_op",
                "args": {},
            }
        )
    for c in copies:
        args: dict[str, object] = {"Model Id": 4294967295, "Task Type": c.queue, "Physic Stream Id": 2}
        if c.operation:
            args["operation"] = c.operation
        events.append(
            {"name": "MEMCPY_ASYNC", "pid": 2, "tid": 2, "ts": f"{EPOCH + c.start:.3f}", "dur": c.duration, "ph": "X", "args": args}
        )
    return json.dumps(events)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def torch_profile(
    root: Path,
    steps: Sequence[Step] = (),
    kernels: Sequence[Kernel] = (),
    host_steps: Sequence[tuple[int, float, float]] = (),
    copies: Sequence[Copy] = (),
    rank: int | None = 0,
    metadata: dict[str, object] | None = None,
    marker: bool = True,
    trace: bool = True,
) -> Path:
    out = root / "ASCEND_PROFILER_OUTPUT"
    info = {
        "config": {"experimental_config": {"_profiler_level": "Level1"}},
        "end_info": {"collectionTimeEnd": 1736408884000000000},
        "rank_id": -1 if rank is None else rank,
    }
    write(root / (f"profiler_info_{rank}.json" if rank is not None else "profiler_info.json"), json.dumps(info))
    if metadata is not None:
        write(root / "profiler_metadata.json", json.dumps(metadata))
    if steps:
        write(out / "step_trace_time.csv", step_trace_csv(steps))
    if kernels:
        write(out / "kernel_details.csv", kernel_csv(kernels))
    if trace:
        write(out / "trace_view.json", trace_json(host_steps, copies))
    if marker:
        write(out / "analyse.done", "")
    return root


def msprof_profile(
    root: Path,
    kernel_slices: Sequence[Sequence[Kernel]],
    timeline_slices: Sequence[list[dict[str, object]]],
    iterations: Sequence[tuple[int, float, float]] = (),
) -> Path:
    """PROF_* dir with `_slice_N` op_summary/msprof files; iterations: (id, time, data aug bound)."""
    out = root / "mindstudio_profiler_output"
    for n, kernels in enumerate(kernel_slices):
        rows = [OP_SUMMARY_HEADER] + [
            f"0,4294967295,{i},7,{k.name},{k.op_type},dynamic,{k.core},{EPOCH + i:.3f}\t,{k.duration},0,8" for i, k in enumerate(kernels)
        ]
        write(out / f"op_summary_slice_{n}_20260101000000.csv", "\n".join(rows) + "\n")
    for n, events in enumerate(timeline_slices):
        write(out / f"msprof_slice_{n}_20260101000000.json", json.dumps(events, indent=2, sort_keys=True))
    if iterations:
        rows = [
            "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),FP to BP Time(us),"
            "Iteration Refresh(us),Data Aug Bound(us),Model ID"
        ]
        rows += [f"0,{i},0,0,0,{t},0,0,{'N/A' if aug is None else aug},1" for i, t, aug in iterations]
        write(out / "step_trace_20260101000000.csv", "\n".join(rows) + "\n")
    return root


def overlap_events(pid: int, spans: Iterable[tuple[str, float, float]], device: int = 0) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [
        {"args": {"name": "Overlap Analysis"}, "name": "process_name", "ph": "M", "pid": pid, "tid": 0},
        {"args": {"labels": f"NPU {device}"}, "name": "process_labels", "ph": "M", "pid": pid, "tid": 0},
    ]
    for name, start, duration in spans:
        events.append({"args": {}, "dur": duration, "name": name, "ph": "X", "pid": pid, "tid": 0, "ts": f"{EPOCH + start:.3f}"})
    return events
