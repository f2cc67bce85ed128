"""A STAND-IN for torch_npu, not Huawei's package: just enough of ``torch.npu`` and
``torch_npu.profiler`` for the hooks' NPU path on a machine without an NPU.

Importing it (with this directory on sys.path) makes ``torch.npu`` available with timing
events on the host clock. Its profiler writes, when a window stops, an export in the layout of
the real torch_npu samples in tests/fixtures/profiling (copied byte for byte, with the
`analyse.done` marker), so the hooks' summary reads real torch_npu files.
"""

from __future__ import annotations

import time

import torch

from torch_npu import profiler  # noqa: F401 - torch_npu.profiler, as the real package has it

STANDIN = True


class Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None

    def record(self, stream: object = None) -> None:
        self.at = time.perf_counter()

    def query(self) -> bool:
        return self.at is not None

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: Event) -> float:
        assert self.at is not None and end.at is not None
        return (end.at - self.at) * 1000.0


class _Npu:
    Event = Event

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def memory_allocated() -> int:
        return 1 << 30

    @staticmethod
    def max_memory_allocated() -> int:
        return 2 << 30

    @staticmethod
    def synchronize() -> None:
        pass


torch.npu = _Npu()
