"""The memory limit the process runs under, from its cgroup (v2 `memory.max`, v1
`memory.limit_in_bytes`), read under a root directory so tests can point it at a fixture tree.

The limit that binds is the lowest one from the process's cgroup up to the hierarchy's root:
a container's own cgroup may be unlimited while its pod's is not. Inside a container the
cgroup filesystem usually shows the container's own cgroup as its root, while
/proc/self/cgroup names the host's path; a path that does not exist under the mount is read
from the mount's root.
"""

from __future__ import annotations

import os
from pathlib import Path

from exporter.core.errors import ReasonError
from exporter.core.inputfile import read_text_input

MAX_READ = 64 * 1024  # one line each, but /proc/self/cgroup on a v1 host holds a line per hierarchy
V1_UNLIMITED = 1 << 62  # v1 prints "no limit" as a page-rounded 2^63 - 1 (9223372036854771712 on 4 KiB pages)
V2_ROOT = "sys/fs/cgroup"
V1_ROOT = "sys/fs/cgroup/memory"


def read_small(path: Path) -> str | None:
    """A small kernel file's text, or None when it cannot be read (read as every file from
    outside is: regular files only, non-blocking open, bounded: core/inputfile.py)."""
    try:
        return read_text_input(path, MAX_READ)
    except ReasonError:
        return None


def parse_membership(text: str) -> tuple[str | None, str | None]:
    """(v1 memory cgroup path, v2 cgroup path) from /proc/self/cgroup; None where absent.

    Lines are `hierarchy-id:controllers:path`; v2 is `0::path`. On hybrid hosts both exist and
    the v1 memory controller is the one that limits.
    """
    v1 = v2 = None
    for line in text.splitlines()[:64]:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v1, v2


def parse_limit(text: str) -> float | None:
    """A limit file's value in bytes; None for no limit ("max", the v1 near-2^63 value) or garbage."""
    value = text.strip()
    if value == "max":
        return None
    try:
        limit = int(value)
    except ValueError:
        return None
    return float(limit) if 0 < limit < V1_UNLIMITED else None


def lowest_limit(mount: Path, cgroup: str, filename: str) -> float | None:
    """The lowest limit in ``filename`` from ``cgroup`` up to ``mount`` (None: unlimited everywhere)."""
    relative = os.path.normpath("/" + cgroup.split(" (deleted)")[0]).lstrip("/")
    directory = mount / relative if relative else mount
    if not directory.is_dir():
        directory = mount
    limits = []
    while True:
        text = read_small(directory / filename)
        limit = parse_limit(text) if text is not None else None
        if limit is not None:
            limits.append(limit)
        if directory == mount or mount not in directory.parents:
            break
        directory = directory.parent
    return min(limits) if limits else None


def memory_limit(root: Path = Path("/")) -> float | None:
    """The memory limit of this process's cgroup, bytes; None when unlimited or unknown."""
    membership = read_small(root / "proc/self/cgroup")
    if membership is None:
        return None
    v1, v2 = parse_membership(membership)
    if v1 is not None:
        return lowest_limit(root / V1_ROOT, v1, "memory.limit_in_bytes")
    if v2 is not None:
        return lowest_limit(root / V2_ROOT, v2, "memory.max")
    return None
