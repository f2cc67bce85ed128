"""The resource metrics: the names and help texts every Prometheus client library uses for a
process (process_*, python_*), and the cgroup memory limit under the exporter's own prefix."""

from __future__ import annotations

from exporter.core.metric import spec

RESIDENT_MEMORY = spec("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", field="resident_memory_bytes")
VIRTUAL_MEMORY = spec("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field="virtual_memory_bytes")
CPU_SECONDS = spec("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", field="cpu_seconds")
OPEN_FDS = spec("process_open_fds", "gauge", "Number of open file descriptors.", field="open_fds")
MAX_FDS = spec("process_max_fds", "gauge", "Maximum number of open file descriptors.", field="max_fds")
START_TIME = spec(
    "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", field="start_time_seconds"
)
MEMORY_LIMIT = spec(
    "cann_exporter_memory_limit_bytes",
    "gauge",
    "Memory limit of the exporter's cgroup (v2 memory.max, v1 memory.limit_in_bytes; the lowest up the hierarchy), "
    "bytes; absent when unlimited.",
    field="memory_limit_bytes",
)
PYTHON_INFO = spec(
    "python_info", "gauge", "Python platform information", ("implementation", "major", "minor", "patchlevel", "version"), field="python"
)
GC_COLLECTED = spec(
    "python_gc_objects_collected_total", "counter", "Objects collected during gc", ("generation",), field=("gc", "collected")
)
GC_UNCOLLECTABLE = spec(
    "python_gc_objects_uncollectable_total",
    "counter",
    "Uncollectable objects found during GC",
    ("generation",),
    field=("gc", "uncollectable"),
)
GC_COLLECTIONS = spec(
    "python_gc_collections_total", "counter", "Number of times this generation was collected", ("generation",), field=("gc", "collections")
)

PROCESS_GAUGES = (RESIDENT_MEMORY, VIRTUAL_MEMORY, CPU_SECONDS, OPEN_FDS, MAX_FDS, START_TIME, MEMORY_LIMIT)
GC_METRICS = (GC_COLLECTED, GC_UNCOLLECTABLE, GC_COLLECTIONS)
RESOURCE_METRICS = (*PROCESS_GAUGES, PYTHON_INFO, *GC_METRICS)
