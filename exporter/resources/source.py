"""Samples the exporter's own process on the sampler's schedule, so a scrape only renders.

prometheus_client's process collector reads /proc (resident and virtual memory, CPU time,
file descriptors, start time); Python's gc module counts collections; cgroup.py reads the
memory limit. Outside Linux the process values are simply absent.
"""

from __future__ import annotations

import gc
import platform
from pathlib import Path

from prometheus_client import ProcessCollector

from exporter.core.sampler import Task
from exporter.resources.cgroup import memory_limit
from exporter.resources.part import GcGeneration, ResourcesPart


def python_info() -> tuple[str, str, str, str, str]:
    major, minor, patchlevel = platform.python_version_tuple()
    return (platform.python_implementation(), major, minor, patchlevel, platform.python_version())


class ResourcesSource:
    NAME = "resources"

    def __init__(self, interval: float = 5.0, root: Path = Path("/")) -> None:
        self.interval = interval
        self.root = root  # where /proc/self/cgroup and /sys/fs/cgroup are read
        self._process = ProcessCollector(registry=None)
        self._python = python_info()
        self._part = ResourcesPart(python=self._python)

    def tasks(self) -> list[Task]:
        return [Task(self.NAME, self.interval, self.refresh)]

    async def refresh(self) -> None:
        self._part = self.sample()

    def sample(self) -> ResourcesPart:
        values: dict[str, float] = {}  # by prometheus_client's sample name
        for metric in self._process.collect():
            for sample in metric.samples:
                values[sample.name] = sample.value
        generations = tuple(
            GcGeneration(n, s.get("collections", 0), s.get("collected", 0), s.get("uncollectable", 0)) for n, s in enumerate(gc.get_stats())
        )
        return ResourcesPart(
            resident_memory_bytes=values.get("process_resident_memory_bytes"),
            virtual_memory_bytes=values.get("process_virtual_memory_bytes"),
            cpu_seconds=values.get("process_cpu_seconds_total"),
            open_fds=values.get("process_open_fds"),
            max_fds=values.get("process_max_fds"),
            start_time_seconds=values.get("process_start_time_seconds"),
            memory_limit_bytes=memory_limit(self.root),
            python=self._python,
            gc=generations,
        )

    def part(self) -> ResourcesPart:
        return self._part
