"""The resources part of the snapshot: the exporter process as last sampled."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.snapshot import PartKey


@dataclass(frozen=True)
class GcGeneration:
    """Python's garbage collector, one generation (gc.get_stats())."""

    generation: int
    collections: int
    collected: int
    uncollectable: int


@dataclass(frozen=True)
class ResourcesPart:
    """None where the platform does not tell (no /proc outside Linux)."""

    resident_memory_bytes: float | None = None
    virtual_memory_bytes: float | None = None
    cpu_seconds: float | None = None
    open_fds: float | None = None
    max_fds: float | None = None
    start_time_seconds: float | None = None
    memory_limit_bytes: float | None = None  # the cgroup's, lowest up the hierarchy; None: unlimited
    python: tuple[str, str, str, str, str] = ("", "", "", "", "")  # implementation, major, minor, patchlevel, version
    gc: tuple[GcGeneration, ...] = ()


RESOURCES = PartKey("resources", ResourcesPart)  # its snapshot key
