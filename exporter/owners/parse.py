"""Who owns a process, from the text the kernel and Slurm write: pure parsers, text in, frozen
records out (docs/formats/owners.md).

- ``/proc/PID/cgroup``: one line per hierarchy, ``ID:CONTROLLERS:PATH`` (v1), ``0::PATH``
  (v2). The path names the owner: a Kubernetes pod (``pod<uid>`` or
  ``kubepods-<qos>-pod<uid>.slice``) and its container, a container of Docker
  (``docker-<id>.scope``, ``/docker/<id>``), containerd (``cri-containerd-<id>.scope``,
  ``nerdctl-<id>.scope``, ``/<namespace>/<id>``) or Podman (``libpod-<id>.scope``), a Slurm
  job step (``/slurm/uid_U/job_J/step_S`` on v1, ``.../job_J/step_S`` under
  ``slurmstepd.scope`` on v2), a systemd service (``*.service``), or nothing: the host. A
  reader in another cgroup namespace sees paths relative to its own root
  (``0::/../../kubepods-...``): every pattern is matched on path components, wherever they are.
- ``/proc/PID/stat``: the start time (field 22, clock ticks after boot), which tells a reused
  pid from the process that held it.
- ``/proc/PID/status``: the real user id (``Uid:``), for Slurm v2 paths that do not carry it.
- a passwd file: user names by uid.
- a Slurm mapping file: the job ids a prolog wrote for one chip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from exporter.core.errors import ReasonError

KUBERNETES, DOCKER, CONTAINERD, PODMAN, SLURM, SYSTEMD, HOST = (
    "kubernetes",
    "docker",
    "containerd",
    "podman",
    "slurm",
    "systemd",
    "host",
)
RUNTIMES = (KUBERNETES, DOCKER, CONTAINERD, PODMAN, SLURM, SYSTEMD, HOST)
CONTAINER_RUNTIMES = (DOCKER, CONTAINERD, PODMAN)

MAX_LINES = 64  # a v1 host has one line per hierarchy (about 15); more is not a cgroup file
MAX_PATH = 4096  # PATH_MAX: a longer line is not the kernel's
MAX_JOB_IDS = 16  # per chip in a mapping file

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
_ID = r"[0-9a-f]{64}"
# A pod's cgroup: `pod<uid>` (cgroupfs driver) or `kubepods-<qos>-pod<uid>.slice` (systemd
# driver, also `kubelet-kubepods-...` under kind), with containerd 1.4's `:cri-containerd:<id>` tail.
_POD = re.compile(rf"(?:[a-z]+(?:-[a-z]+)*-)?pod(?P<uid>{_UID})(?:\.slice)?(?::.*)?")
# A container's cgroup, by the prefix its engine gives it; `libpod-conmon-` and
# `crio-conmon-` (the monitors) do not match, as the id must follow the prefix.
_SCOPE = re.compile(rf"(?P<engine>docker|cri-containerd|crio|libpod|libpod-payload|nerdctl)-(?P<id>{_ID})(?:\.scope)?")
_CRI_COLON = re.compile(rf".*:cri-containerd:(?P<id>{_ID})")
_BARE = re.compile(_ID)
_ENGINES = {
    "docker": DOCKER,
    "cri-containerd": CONTAINERD,
    "nerdctl": CONTAINERD,
    "crio": "crio",
    "libpod": PODMAN,
    "libpod-payload": PODMAN,
}
_JOB = re.compile(r"job_(?P<job>[0-9]{1,20})")
_STEP = re.compile(r"step_(?P<step>[A-Za-z0-9_]{1,32})")
_SLURM_UID = re.compile(r"uid_(?P<uid>[0-9]{1,10})")
_SERVICE = re.compile(r"[^/]{1,256}\.service")
_JOB_ID = re.compile(r"[0-9]{1,20}(?:_[0-9]{1,10})?")  # a job, or an array job's task (1234_7)
_DEVICE_FILE = re.compile(r"[0-9]{1,6}")


class OwnerError(ReasonError):
    """A process's files could not be read or made sense of; ``reason`` says which way."""


@dataclass(frozen=True)
class CgroupOwner:
    """Who a process belongs to, as its cgroup paths name it."""

    runtime: str = HOST  # one of RUNTIMES
    container_id: str = ""  # 64 hex digits (kubernetes, docker, containerd, podman)
    pod_uid: str = ""  # with dashes (kubernetes)
    engine: str = ""  # kubernetes: the engine the container's cgroup names (containerd, docker, crio), "" for a bare id
    job_id: str = ""  # slurm
    step: str = ""  # slurm: 0, batch, extern, interactive ...
    uid: int | None = None  # slurm v1 paths (uid_U); v2 takes it from /proc/PID/status
    unit: str = ""  # systemd


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part and part not in (".", "..")]


def classify_path(path: str) -> CgroupOwner:
    """The owner one cgroup path names (HOST when it names none)."""
    parts = _components(path.removesuffix(" (deleted)"))
    pod_uid, pod_at = "", -1
    container, engine, container_at = "", "", -1
    for index, part in enumerate(parts):
        if (pod := _POD.fullmatch(part)) is not None:
            pod_uid, pod_at = pod.group("uid").replace("_", "-"), index
            if (colon := _CRI_COLON.fullmatch(part)) is not None:
                container, engine, container_at = colon.group("id"), CONTAINERD, index
        elif (scope := _SCOPE.fullmatch(part)) is not None:
            container, engine, container_at = scope.group("id"), _ENGINES[scope.group("engine")], index
        elif _BARE.fullmatch(part):
            container, engine, container_at = part, _bare_engine(parts[index - 1] if index else ""), index
    if pod_uid:  # a container started before the pod's cgroup (a kind node's) is not the pod's
        inner = container_at >= pod_at
        return CgroupOwner(KUBERNETES, container if inner else "", pod_uid, engine if inner and engine != "pod" else "")
    if container and engine in CONTAINER_RUNTIMES:
        return CgroupOwner(engine, container)
    slurm = _slurm(parts)
    if slurm is not None:
        return slurm
    units = [part for part in parts if _SERVICE.fullmatch(part)]
    return CgroupOwner(SYSTEMD, unit=units[-1]) if units else CgroupOwner()


def _bare_engine(parent: str) -> str:
    """Whose container a bare 64-digit id is, by the cgroup above it: Docker's cgroupfs driver
    puts it under `docker`, the kubelet's under the pod, containerd's under its namespace
    (`/default/<id>`). With nothing visible above it (the root, or a reader in another cgroup
    namespace seeing `/../<id>`), Docker's: the engine that runs containers outside Kubernetes
    most often."""
    if parent == "docker" or not parent:
        return DOCKER
    return "pod" if _POD.fullmatch(parent) else CONTAINERD


def _slurm(parts: list[str]) -> CgroupOwner | None:
    job = step = uid = None
    for part in parts:
        if (found := _JOB.fullmatch(part)) is not None:
            job = found.group("job")
        elif (found := _STEP.fullmatch(part)) is not None and job is not None:
            step = found.group("step")
        elif (found := _SLURM_UID.fullmatch(part)) is not None:
            uid = int(found.group("uid"))
    if job is None or (step is None and not any("slurm" in part for part in parts)):
        return None
    return CgroupOwner(SLURM, job_id=job, step=step or "", uid=uid)


# Which owner wins when the hierarchies of a v1 or hybrid host disagree: the most specific.
_RANK = {KUBERNETES: 0, DOCKER: 1, CONTAINERD: 1, PODMAN: 1, SLURM: 2, SYSTEMD: 3, HOST: 4}


def cgroup_paths(text: str) -> list[str]:
    """The path of every well-formed line of a /proc/PID/cgroup file; OwnerError (garbled)
    when there is none or the file is not one (too many lines)."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise OwnerError("garbled", f"{len(lines)} lines, more than a cgroup file has ({MAX_LINES})")
    paths = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) == 3 and fields[0].isdigit() and fields[2].startswith("/") and len(fields[2]) <= MAX_PATH:
            paths.append(fields[2])
    if not paths:
        raise OwnerError("garbled", "no line of the form ID:CONTROLLERS:/PATH")
    return paths


def parse_cgroup(text: str) -> CgroupOwner:
    """The owner of a process from its /proc/PID/cgroup text: the most specific one any of its
    hierarchies names (a v1 freezer line naming a Slurm step beats the systemd line naming
    slurmd.service)."""
    owners = [classify_path(path) for path in cgroup_paths(text)]
    return min(owners, key=lambda owner: _RANK[owner.runtime])


def parse_start_time(text: str) -> int:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks after boot. The
    command (field 2) is in parentheses and may hold anything, so fields count from its last ')'."""
    _, paren, rest = text.rpartition(")")
    fields = rest.split()
    if not paren or len(fields) < 20 or not fields[19].isdigit():
        raise OwnerError("garbled", "no start time (field 22) in /proc/PID/stat")
    return int(fields[19])


def parse_uid(text: str) -> int | None:
    """The real user id from /proc/PID/status (`Uid:\\treal\\teffective\\tsaved\\tfs`)."""
    for line in text.splitlines()[:128]:
        if line.startswith("Uid:"):
            fields = line[4:].split()
            return int(fields[0]) if fields and fields[0].isdigit() and len(fields[0]) <= 10 else None
    return None


def parse_passwd(lines: Iterable[str]) -> dict[int, str]:
    """User names by uid from passwd lines (`name:password:uid:gid:gecos:home:shell`); the
    first name of a uid wins, as getpwuid(3) answers."""
    users: dict[int, str] = {}
    for line in lines:
        fields = line.rstrip("\n").split(":")
        if len(fields) >= 3 and fields[0] and fields[2].isdigit() and len(fields[2]) <= 10:
            users.setdefault(int(fields[2]), fields[0])
    return users


def parse_job_ids(text: str) -> tuple[str, ...]:
    """The job ids of a Slurm mapping file (one per line, or separated by blanks), at most
    MAX_JOB_IDS, in order; anything else in the file is ignored. Empty: the chip is free."""
    found: dict[str, None] = {}
    for word in text.split():
        if _JOB_ID.fullmatch(word):
            found.setdefault(word)
    return tuple(found)[:MAX_JOB_IDS]


def mapping_device(name: str) -> int | None:
    """The chip logic id a mapping file is named after (`0`, `1`, ...), or None."""
    return int(name) if _DEVICE_FILE.fullmatch(name) else None
