"""The bounded reads of a process's files under the procfs root (`owners.procfs`: /proc, or the
host's /proc mounted into the exporter's container), through core/inputfile.py: regular files
only, a size cap each, nothing outside the root. Blocking: the source calls these in a thread.

A pid can vanish or be reused between npu-smi's listing and these reads. A process's start
time (/proc/PID/stat, field 22) is read before and after its cgroup: a different start time
means another process took the pid meanwhile, and nothing read is kept (`reused`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from exporter.core.inputfile import InputRefused, read_input
from exporter.owners.parse import RUNTIMES, SLURM, CgroupOwner, OwnerError, parse_cgroup, parse_start_time, parse_uid

MAX_STAT = 4096  # one line: 52 numbers and a 16-byte command
MAX_CGROUP = 64 * 1024  # about 15 lines of at most PATH_MAX on a v1 host
MAX_STATUS = 16 * 1024  # some 60 short lines
MAX_CENSUS = 1024  # processes check-config classifies


@dataclass(frozen=True)
class ProcessOwner:
    """A process's owner as read, with the start time that tells it from a later one of its pid."""

    pid: int
    start: int
    owner: CgroupOwner


def root_problem(root: str) -> tuple[str, str] | None:
    """(reason, message) when the procfs root cannot be listed, else None."""
    if not os.path.isdir(root):
        return "not_found", f"{root} is not a directory"
    if not os.access(root, os.R_OK | os.X_OK):
        return "permission_denied", f"no permission to read {root}"
    return None


def read_file(root: str, pid: int, name: str, max_bytes: int) -> str:
    """``root/pid/name`` as text (undecodable bytes replaced); OwnerError ``vanished`` when the
    process is gone, else the refusal's reason (``too_large``, ``unreadable``)."""
    directory = os.path.join(root, str(pid))
    try:
        data = read_input(os.path.join(directory, name), max_bytes, root=root)
    except InputRefused as exc:
        if not os.path.lexists(directory):
            raise OwnerError("vanished", f"process {pid} exited before its {name} was read") from None
        reason = exc.reason if exc.reason in ("too_large", "permission_denied") else "unreadable"
        raise OwnerError(reason, str(exc)) from None
    except OSError as exc:  # a read of an exited process's file: ESRCH
        if not os.path.lexists(directory):
            raise OwnerError("vanished", f"process {pid} exited while its {name} was read") from None
        raise OwnerError("unreadable", f"{directory}/{name}: {exc}") from None
    return data.decode("utf-8", errors="replace")


def start_time(root: str, pid: int) -> int:
    return parse_start_time(read_file(root, pid, "stat", MAX_STAT))


def read_owner(root: str, pid: int, start: int) -> ProcessOwner:
    """The owner of process ``pid`` that started at ``start`` (its stat, read by the caller):
    its cgroup, its user id where a Slurm v2 path does not carry it, and its stat again."""
    owner = parse_cgroup(read_file(root, pid, "cgroup", MAX_CGROUP))
    if owner.runtime == SLURM and owner.uid is None:
        try:
            uid = parse_uid(read_file(root, pid, "status", MAX_STATUS))
        except OwnerError as exc:
            if exc.reason == "vanished":
                raise
            uid = None
        owner = CgroupOwner(SLURM, job_id=owner.job_id, step=owner.step, uid=uid)
    if start_time(root, pid) != start:
        raise OwnerError("reused", f"process {pid} was replaced by another while its cgroup was read")
    return ProcessOwner(pid, start, owner)


def census(root: str, limit: int = MAX_CENSUS) -> tuple[int, Counter[str]]:
    """(processes looked at, how many of them each runtime holds): the first ``limit`` pids under
    the root, each classified by its cgroup (one that cannot be read is not counted by runtime).
    What check-config says the source can see: a container's own /proc shows a handful."""
    counts: Counter[str] = Counter()
    seen = 0
    try:
        entries = os.scandir(root)
    except OSError:
        return 0, counts
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            if seen >= limit:
                break
            seen += 1
            try:
                counts[parse_cgroup(read_file(root, int(entry.name), "cgroup", MAX_CGROUP)).runtime] += 1
            except OwnerError:
                continue
    return seen, counts


def census_text(root: str, limit: int = MAX_CENSUS) -> str:
    """`412 processes: kubernetes 37, docker 5, systemd 120, host 250`, or that there are none."""
    seen, counts = census(root, limit)
    if not seen:
        return "no process there: not a procfs"
    held = ", ".join(f"{runtime} {counts[runtime]}" for runtime in RUNTIMES if counts[runtime])
    many = f"the first {seen} processes" if seen >= limit else f"{seen} processes"
    return f"{many}: {held}" if held else many
