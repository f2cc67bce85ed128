"""The profilers of the PyTorch adapter's profiling windows (exporter.hooks.profiling).

On an NPU, torch_npu's profiler writes (and analyses) its `*_ascend_pt` export into the
window's directory; on CUDA and the CPU, torch.profiler records the window and its Chrome
trace is saved there from the background thread. Steps are marked `ProfilerStep#N` with
``record_function``, as the profilers' own ``step()`` does, so every backend's output has the
step spans the summary reads.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch

from exporter.hooks.profiling import ProfilerSession

TRACE_NAME = "trace.json"  # what exporter.profiles.window reads for cpu and cuda


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """File descriptor 2 on /dev/null for one call: Kineto prints a `USDT: ... profiler_start`
    / `profiler_stop` line from C++ at every window's start and stop. Only those few
    milliseconds are muted; anything else the process writes to stderr is untouched."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to keep quiet
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _Session:
    def __init__(self, profiler: Any, directory: str, save: bool) -> None:
        self._profiler = profiler
        self._directory = directory
        self._save = save
        self._mark: Any = None

    def step_begin(self, number: int) -> None:
        self._mark = torch.profiler.record_function(f"ProfilerStep#{number}")
        self._mark.__enter__()

    def step_end(self) -> None:
        mark, self._mark = self._mark, None
        if mark is not None:
            mark.__exit__(None, None, None)

    def stop(self) -> None:
        self.step_end()
        with quiet_stderr():
            self._profiler.stop()  # torch_npu: on_trace_ready writes the export now

    def export(self) -> None:
        if self._save:  # Kineto's C++ writer, off the loop thread
            self._profiler.export_chrome_trace(os.path.join(self._directory, TRACE_NAME))


class TorchProfilerBackend:
    """torch.profiler: the CPU, plus the CUDA activity on a CUDA device."""

    def __init__(self, cuda: bool) -> None:
        self.name = "cuda" if cuda else "cpu"
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._activities = activities

    def start(self, directory: str) -> ProfilerSession:
        profiler = torch.profiler.profile(activities=self._activities)
        with quiet_stderr():
            profiler.start()
        return _Session(profiler, directory, save=True)


class NpuProfilerBackend:
    """torch_npu.profiler, its export analysed in the background where torch_npu can (async_mode)."""

    name = "npu"

    def __init__(self) -> None:
        import torch_npu  # noqa: F401 - present whenever torch.npu is

        self._profiler = torch_npu.profiler

    def start(self, directory: str) -> ProfilerSession:
        p = self._profiler
        try:
            handler = p.tensorboard_trace_handler(directory, analyse_flag=True, async_mode=True)
        except TypeError:  # older torch_npu: analysed when the window closes
            handler = p.tensorboard_trace_handler(directory)
        profiler = p.profile(activities=[p.ProfilerActivity.CPU, p.ProfilerActivity.NPU], on_trace_ready=handler)
        with quiet_stderr():
            profiler.start()
        return _Session(profiler, directory, save=False)


def profiler_backend(kind: str) -> TorchProfilerBackend | NpuProfilerBackend:
    """The profiler for a TorchMonitor's device kind (npu, cuda, cpu; a custom backend profiles the CPU)."""
    if kind == "npu":
        return NpuProfilerBackend()
    return TorchProfilerBackend(cuda=kind == "cuda")
