"""The resources source on this very process (real /proc, real gc) and a fixture cgroup tree,
rendered by its collector."""

from __future__ import annotations

import asyncio
import gc
import os
import sys

import pytest

from exporter.resources.collector import ResourcesCollector
from exporter.resources.part import ResourcesPart
from exporter.resources.source import ResourcesSource
from tests.support.exposition import render, value, values
from tests.support.paths import FIXTURES

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process values come from /proc (Linux)")


@linux_only
def test_this_process_as_sampled() -> None:
    source = ResourcesSource(root=FIXTURES / "cgroup" / "v2-pod-limited__kubernetes")
    asyncio.run(source.refresh())
    part = source.part()
    assert part.resident_memory_bytes and part.resident_memory_bytes > 1 << 20
    assert part.open_fds and part.max_fds and 0 < part.open_fds <= part.max_fds
    assert part.memory_limit_bytes == 256 * 2**20
    assert [g.generation for g in part.gc] == list(range(len(gc.get_stats())))
    found = render(ResourcesCollector(), part)
    assert value(found, "process_resident_memory_bytes") == part.resident_memory_bytes
    assert value(found, "cann_exporter_memory_limit_bytes") == 256 * 2**20
    assert value(found, "process_cpu_seconds_total") >= 0
    assert value(found, "python_info", implementation=sys.implementation.name.replace("cpython", "CPython")) == 1
    assert set(values(found, "python_gc_collections_total", "generation")) == {"0", "1", "2"}


@linux_only
def test_an_open_file_is_counted() -> None:
    source = ResourcesSource()
    before = source.sample().open_fds
    descriptor = os.open(os.devnull, os.O_RDONLY)
    try:
        assert source.sample().open_fds == before + 1
    finally:
        os.close(descriptor)


def test_unlimited_and_unknown_values_are_absent() -> None:
    found = render(ResourcesCollector(), ResourcesPart())
    assert value(found, "cann_exporter_memory_limit_bytes") is None
    assert value(found, "process_resident_memory_bytes") is None
    assert value(found, "python_info") is None
