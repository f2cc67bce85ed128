"""The summary of one profiling window of the training hooks, made out of the training process.

The hooks (exporter/hooks/profiling.py) run ``python -m exporter.profiles.window DIR --backend B``
on the directory a window wrote and POST what it prints to /api/v1/profiles. The figures come
from the same code as watched exports: on an NPU the window is a torch_npu export, found,
awaited and read like one in a watched directory (layout.py, load.py) and summarised by
indicators.py; torch.profiler traces (CPU, CUDA) are read by formats/torch_trace.py into the
same ProfileData. What a backend does not measure stays absent (docs/training-hooks.md,
"Profiling windows"): on the CPU there is no device, so no compute, idle or copy share, and
operator shares are shares of operator self time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from exporter.profiles.formats.common import US, Limits, ProfileParseError
from exporter.profiles.formats.tables import KernelTable, StepKernels, StepTime
from exporter.profiles.formats.torch_trace import TorchTrace, read_torch_trace
from exporter.profiles.formats.trace import MemcpyTask, TraceData
from exporter.profiles.indicators import ProfileSummary, summarize
from exporter.profiles.layout import find_profiles, is_finished, list_export
from exporter.profiles.load import ProfileData, load_profile

BACKENDS = ("cpu", "cuda", "npu")
TRACE_NAME = "trace.json"  # what the hooks export a torch.profiler window to
TOP_K = 5
# Kineto writes ~1.3 KB per event (indented, with args): a 1 M-event window is ~1.3 GB. Streamed,
# so the bound is on the time spent, not on memory.
TORCH_TRACE_BYTES = 2 << 30
# Such a trace holds ~40 bytes per event kept (formats/budget.py DEVICE_EVENT), and its two
# passes cost ~170 work units per event: the allowances of a window are raised to fit 1.6 M.
TORCH_TRACE_MEMORY = 96 << 20
TORCH_TRACE_WORK = 400_000_000
PRODUCER = "hooks"  # ProfileSummary.producer of a window's summary


def summarise_window(
    directory: Path, backend: str, job_name: str, rank: int | None, *, top_k: int = TOP_K, wait: float = 120.0, limits: Limits = Limits()
) -> ProfileSummary:
    """The window's summary; ProfileParseError when it holds nothing usable."""
    if backend == "npu":
        return _npu(directory, job_name, rank, top_k, wait, limits)
    return _torch(directory / TRACE_NAME, job_name, rank, top_k, limits, cuda=backend == "cuda")


def _npu(directory: Path, job_name: str, rank: int | None, top_k: int, wait: float, limits: Limits) -> ProfileSummary:
    """torch_npu writes (and analyses) its export itself: wait until it is finished, as the watcher does."""
    deadline = time.monotonic() + wait
    previous: dict[str, str] = {}
    while True:
        refs, _ = find_profiles(directory)
        listings = {str(r.path): list_export(r) for r in refs}
        done = [
            r
            for r in refs
            if (lst := listings[str(r.path)]) is not None and is_finished(r, lst, previous.get(str(r.path)), time.time(), settle=2.0)
        ]
        if done:
            ref = done[-1]
            data = load_profile(ref.path, ref.producer, job_name, limits)[0]
            summary = summarize(replace(data, job_name=job_name, rank=rank if rank is not None else data.rank), top_k)[0]
            return replace(summary, producer=PRODUCER)
        if time.monotonic() > deadline:
            found = ", ".join(r.path.name for r in refs) or "no *_ascend_pt directory"
            raise ProfileParseError("no_data", f"{directory.name}: no finished torch_npu export after {wait:g} s ({found})")
        previous = {k: v.fingerprint for k, v in listings.items() if v is not None}
        time.sleep(0.5)


def _torch(path: Path, job_name: str, rank: int | None, top_k: int, limits: Limits, cuda: bool) -> ProfileSummary:
    if not path.is_file():
        raise ProfileParseError("no_data", f"{path.parent.name}: the window wrote no {TRACE_NAME}")
    trace = read_torch_trace(
        path,
        replace(
            limits,
            max_trace_bytes=max(limits.max_trace_bytes, TORCH_TRACE_BYTES),
            max_export_memory=max(limits.max_export_memory, TORCH_TRACE_MEMORY),
            max_export_work=max(limits.max_export_work, TORCH_TRACE_WORK),
        ),
    )
    data = torch_profile_data(trace, str(path.parent), job_name, rank, cuda)
    if not data.kernels:
        raise ProfileParseError("no_data", f"{path.name}: no operator in the trace")
    summary = summarize(data, top_k)[0]
    if not data.steps:  # no device step times (CPU): the mean host step
        spans = [s.duration_us for s in trace.host_steps]
        summary = replace(
            summary, step_duration_seconds=sum(spans) / len(spans) * US if spans else None, step_count=len(spans), kernel_time_seconds=None
        )
    return summary


def torch_profile_data(trace: TorchTrace, path: str, job_name: str, rank: int | None, cuda: bool) -> ProfileData:
    """A torch.profiler trace as the ProfileData the indicators read.

    CUDA: device steps (compute, exposed communication, Free = span - busy), kernel time per
    launching operator, copies. CPU: operator self time stands in for kernel time, no step rows.
    """
    device = cuda and trace.has_device
    ops = trace.kernels if device else trace.cpu_ops
    compute = sum(o.total_us for o in ops)
    longest = max(ops, key=lambda o: o.max_us, default=None)
    kernels = (
        KernelTable(
            (
                StepKernels(
                    None,
                    ops,
                    compute,
                    trace.communication_us if device else 0.0,
                    0.0,
                    longest.op_type if longest else None,
                    longest.max_us if longest else None,
                ),
            ),
            rows=sum(o.count for o in ops),
        )
        if ops
        else None
    )
    steps = (
        tuple(
            StepTime(s.step, s.computing_us, s.communication_not_overlapped_us, max(0.0, s.span_us - s.busy_us)) for s in trace.device_steps
        )
        if device
        else ()
    )
    copies = TraceData(trace.host_steps, tuple(MemcpyTask(s, d, k) for s, d, k in trace.memcpy), (), trace.events) if device else None
    finished = os.path.getmtime(path) if os.path.exists(path) else None
    return ProfileData(
        path=path,
        producer=PRODUCER,
        job_name=job_name,
        rank=rank,
        finished_at=finished,
        steps=steps,
        kernels=kernels,
        trace=copies,
        issues=trace.issues,
    )


# --- the wire document (POST /api/v1/profiles, without the identity the hooks add) ------------

RATIOS = (
    "compute_ratio",
    "communication_ratio",
    "idle_ratio",
    "memcpy_ratio",
    "framework_overhead_ratio",
    "top3_operator_ratio",
    "max_operator_ratio",
)


def summary_document(summary: ProfileSummary, backend: str) -> dict[str, Any]:
    """The figures a window's summary carries; absent ones are left out."""
    doc: dict[str, Any] = {"backend": backend, "steps": summary.step_count}
    if summary.finished_at is not None:
        doc["finished_at"] = round(summary.finished_at, 3)
    if summary.step_duration_seconds is not None:
        doc["step_duration_seconds"] = summary.step_duration_seconds
    for name in RATIOS:
        value = getattr(summary, name)
        if value is not None and math.isfinite(value):
            doc[name] = min(1.0, max(0.0, value))
    if summary.memcpy_kind_ratios:
        doc["memcpy_kind_ratios"] = {k: min(1.0, max(0.0, v)) for k, v in summary.memcpy_kind_ratios}
    if summary.top_operators:
        doc["operators"] = [
            {"op_type": o.op_type, "ratio": min(1.0, max(0.0, o.ratio)), "seconds": o.time_us * US, "count": o.count}
            for o in summary.top_operators
        ]
    return doc


def main(argv: list[str] | None = None) -> int:
    """Print the window's summary document as JSON; exit 1 (reason on stderr) when there is none."""
    parser = argparse.ArgumentParser(prog="python -m exporter.profiles.window", description=main.__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--job-name", default="job")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--top-k", type=int, default=TOP_K)
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for a torch_npu export to finish")
    parser.add_argument("--nice", type=int, default=10, help="lower this process's CPU priority (the training loop comes first)")
    args = parser.parse_args(argv)
    if args.nice:
        try:
            os.nice(args.nice)
        except OSError:
            pass
    try:
        summary = summarise_window(args.directory, args.backend, args.job_name, args.rank, top_k=args.top_k, wait=args.wait)
    except ProfileParseError as exc:
        print(f"{exc.reason}: {exc.message}", file=sys.stderr)
        return 1
    json.dump(summary_document(summary, args.backend), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
