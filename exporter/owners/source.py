"""Reads who owns each process npu-smi shows on a chip, on the sampler's schedule.

Every run takes the processes of the latest npu-smi overview, reads each one's cgroup under
`owners.procfs` (procfs.py, in a thread), keeps the owner by pid and start time (a pid seen
again with the same start time is not read again; with another, it is another process), asks
the engines for the names of new containers and the user database for Slurm users' names
(names.py), and reads the Slurm mapping directory when one is set (hostfiles.py).

Recorded under the source name ``owners``: the procfs root, the engines' sockets, the passwd
file and the mapping directory are its subjects. A root that cannot be read is one warning
(the health's, once) and every process on the host runtime; it never touches the chips'
metrics. A process that cannot be read (gone, replaced, a hostile file) is skipped, not a
failure: counted by reason in cann_exporter_owner_pids_skipped_total.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from exporter.core import clock as clocks
from exporter.core.clock import Clock
from exporter.core.health import Failure, HealthRegistry
from exporter.core.sampler import Task
from exporter.npusmi.part import ChipSample, ProcessSample
from exporter.owners.hostfiles import read_mapping
from exporter.owners.names import NAMED_RUNTIMES, ContainerNames, Lookup, UserNames
from exporter.owners.options import OwnersOptions
from exporter.owners.parse import CONTAINERD, DOCKER, HOST, PODMAN, SLURM, CgroupOwner, OwnerError
from exporter.owners.part import Holder, OwnersPart, chip_owners
from exporter.owners.procfs import ProcessOwner, read_owner, root_problem, start_time
from exporter.pods.part import ChipPod

log = logging.getLogger("exporter.owners")

SOURCE_NAME = "owners"
MAX_PROCESSES = 1024  # processes read per run; npu-smi lists a few per chip
# Why a process was not attributed (label `reason` of cann_exporter_owner_pids_skipped_total).
SKIP_REASONS = ("vanished", "reused", "too_large", "permission_denied", "unreadable", "garbled", "too_many")

Processes = Callable[[], Sequence[ProcessSample]]


def resolve(root: str, pids: Sequence[int], seen: dict[int, ProcessOwner]) -> tuple[dict[int, ProcessOwner], Counter[str]]:
    """The owner of each pid (read again only when its start time changed), and the skipped by
    reason. Blocking: run in a thread."""
    owners: dict[int, ProcessOwner] = {}
    skipped: Counter[str] = Counter()
    for pid in pids:
        try:
            start = start_time(root, pid)
            known = seen.get(pid)
            owners[pid] = known if known is not None and known.start == start else read_owner(root, pid, start)
        except OwnerError as exc:
            skipped[exc.reason if exc.reason in SKIP_REASONS else "unreadable"] += 1
    return owners, skipped


class OwnerSource:
    """The owners of npu-smi's processes as of the latest run; ``part(...)`` joins them to the
    chips, the kubelet's pods and the Slurm mapping."""

    def __init__(
        self,
        options: OwnersOptions,
        health: HealthRegistry,
        processes: Processes,
        *,
        max_age: float = 180.0,
        lookup: Lookup | None = None,
        clock: Clock = clocks.monotonic,
    ) -> None:
        self.options = options
        self.health = health
        self.name = SOURCE_NAME
        self.max_age = max_age
        self._processes = processes
        self._clock = clock
        sockets = {DOCKER: options.docker_socket, PODMAN: options.podman_socket, CONTAINERD: options.containerd_socket}
        self.containers = ContainerNames(sockets, options.timeout, lookup, clock)
        self.users = UserNames(options.passwd, options.timeout, clock=clock)
        self._seen: dict[int, ProcessOwner] = {}
        self._holders: dict[int, Holder] = {}
        self._jobs: dict[int, tuple[str, ...]] = {}
        self._at: float | None = None
        self._skipped: Counter[str] = Counter({reason: 0 for reason in SKIP_REASONS})
        self._warned_none_found = False

    def tasks(self) -> list[Task]:
        return [Task(self.name, self.options.interval, self.refresh)]

    async def refresh(self) -> None:
        """One run; never raises (except cancellation). Failures go to the HealthRegistry."""
        begin = time.monotonic()
        procfs = self.options.procfs
        processes = list(self._processes())
        pids = list(dict.fromkeys(process.pid for process in processes))
        if len(pids) > MAX_PROCESSES:
            self._skipped["too_many"] += len(pids) - MAX_PROCESSES
            pids = pids[:MAX_PROCESSES]
        failures: list[Failure] = []
        subjects = [procfs]
        problem = await asyncio.to_thread(root_problem, procfs)
        if problem is not None:  # nothing can be told apart: every process is the host's
            failures.append(Failure(procfs, problem[0], f"{problem[1]}: every process is attributed to the host"))
            owners = {pid: ProcessOwner(pid, 0, CgroupOwner(HOST)) for pid in pids}
        else:
            owners, skipped = await asyncio.to_thread(resolve, procfs, pids, dict(self._seen))
            self._skipped.update(skipped)
            self._warn_if_none_found(pids, owners, skipped)
        self._seen = owners
        failures += await self._names(owners)
        subjects += self.containers.subjects()
        uids = [o.owner.uid for o in owners.values() if o.owner.runtime == SLURM and o.owner.uid is not None]
        users, passwd_failures = await self.users.names(uids)
        failures += passwd_failures
        if self.options.passwd is not None and uids:
            subjects.append(self.options.passwd)
        self._jobs = await self._mapping(failures, subjects)
        names = {process.pid: process.name for process in processes}
        self._holders = {pid: self._holder(names[pid], found, users) for pid, found in owners.items()}
        self._at = self._clock()
        self.health[self.name].record(time.monotonic() - begin, failures, subjects)

    async def _names(self, owners: dict[int, ProcessOwner]) -> list[Failure]:
        wanted = [(o.owner.runtime, o.owner.container_id) for o in owners.values() if o.owner.runtime in NAMED_RUNTIMES]
        return await self.containers.refresh(wanted)

    async def _mapping(self, failures: list[Failure], subjects: list[str]) -> dict[int, tuple[str, ...]]:
        directory = self.options.slurm_mapping_dir
        if directory is None:
            return {}
        subjects.append(directory)
        try:
            return await asyncio.to_thread(read_mapping, directory)
        except OwnerError as exc:
            failures.append(Failure(directory, exc.reason, str(exc)))
            return {}

    def _holder(self, name: str, found: ProcessOwner, users: dict[int, str]) -> Holder:
        owner = found.owner
        container = self.containers.name(owner.runtime, owner.container_id) if owner.container_id else ""
        user = users.get(owner.uid, "") if owner.uid is not None else ""
        return Holder(name, owner, container, user)

    def _warn_if_none_found(self, pids: Sequence[int], owners: dict[int, ProcessOwner], skipped: Counter[str]) -> None:
        """Once: npu-smi shows processes, and none of them is under the procfs root (a container's
        own /proc, where the host's pids are not)."""
        if pids and not owners and skipped["vanished"] == len(pids) and not self._warned_none_found:
            self._warned_none_found = True
            log.warning(
                "no process npu-smi shows is under owners.procfs: is it the host's /proc?",
                extra={"source": self.name, "procfs": self.options.procfs, "processes": len(pids)},
            )

    def fresh(self) -> bool:
        return self._at is not None and self._clock() - self._at <= self.max_age

    def part(self, processes: Sequence[ProcessSample], chips: Sequence[ChipSample] = (), pods: Sequence[ChipPod] = ()) -> OwnersPart:
        """Who holds each chip as of the latest run (nothing once that is older than max_age)."""
        found = chip_owners(processes, self._holders, pods, chips, self._jobs) if self.fresh() else ()
        return OwnersPart(found, tuple(sorted(self._skipped.items())), self.containers.counts())
