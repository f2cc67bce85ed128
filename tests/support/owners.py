"""procfs trees for the owner source: `<root>/<pid>/cgroup` holding a real /proc/PID/cgroup of
tests/fixtures/cgroup-procs (each with its .src), `<root>/<pid>/stat` a real process's stat."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import FIXTURES

CGROUP_FIXTURES = FIXTURES / "cgroup-procs"
# The pids of info__910B3__25.5.1__1's process table, chip 0 of NPU 0 to 7.
PIDS_910B3 = (3233241, 3233701, 3234962, 3235553, 3232170, 3231929, 2895155, 1886762)


def cgroup_text(name: str) -> str:
    path = CGROUP_FIXTURES / name
    assert (CGROUP_FIXTURES / f"{name}.src").exists(), f"{name} has no provenance"
    return path.read_text()


def real_stat(pid: int | None = None) -> str:
    """The kernel's /proc/PID/stat of a live process (this one by default)."""
    return Path(f"/proc/{pid or os.getpid()}/stat").read_text()


def procfs_tree(root: Path, cgroups: Mapping[int, str], *, stat_of: int | None = None) -> Path:
    """A procfs root where each pid's cgroup is the named fixture and its stat a live process's."""
    stat = real_stat(stat_of)
    for pid, name in cgroups.items():
        directory = root / str(pid)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cgroup").write_text(cgroup_text(name))
        (directory / "stat").write_text(stat)
    return root
