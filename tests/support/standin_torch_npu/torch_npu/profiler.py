"""The stand-in's ``torch_npu.profiler``: ``profile`` with start/stop and ``on_trace_ready``,
``tensorboard_trace_handler`` writing a `<host>_<pid>_<ms>_ascend_pt` export of real samples."""

from __future__ import annotations

import enum
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.profile_exports import PT_LEVEL1, build

calls: list[str] = []  # what the hooks did with the profiler, for the tests


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


def tensorboard_trace_handler(
    dir_name: str, worker_name: str | None = None, analyse_flag: bool = True, async_mode: bool = False
) -> Callable[[Any], None]:
    def handler(prof: profile) -> None:
        name = f"{worker_name or socket.gethostname()}_{os.getpid()}_{int(time.time() * 1000)}_ascend_pt"
        build(Path(dir_name) / name, PT_LEVEL1)
        calls.append(f"export analyse_flag={analyse_flag} async_mode={async_mode}")

    return handler


class profile:  # noqa: N801 - the real class name
    def __init__(
        self, activities: list[ProfilerActivity] | None = None, on_trace_ready: Callable[[Any], None] | None = None, **kwargs: Any
    ) -> None:
        self.activities = activities
        self.on_trace_ready = on_trace_ready

    def start(self) -> None:
        calls.append("start")

    def stop(self) -> None:
        calls.append("stop")
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)
