"""The owner source's registration: who holds each chip (`collector.owners`), read from the
cgroups of the processes npu-smi shows on the chips, joined to the kubelet's pods where that
source is on (it reads the pods part the table builds before it).

Under the built-in simulator, with `owners.procfs` left at /proc, the simulated model's own
procfs tree is read (simulator/procfs.py: the processes its npu-smi shows, one owner of each
runtime across the chips), with the simulated users for `owners.passwd` left unset; the engines'
sockets are not asked (the simulated containers are none of theirs). A user's other procfs wins,
and with it the host's passwd and sockets."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.snapshot import Snapshot
from exporter.core.source import Derived, Source
from exporter.npusmi.part import DEVICES, ProcessSample
from exporter.owners.collector import OwnerCollector
from exporter.owners.engine import socket_problem
from exporter.owners.metrics import OWNER_NOTE
from exporter.owners.options import DEFAULT_PROCFS, OWNERS_OPTIONS, OwnersOptions
from exporter.owners.part import OWNERS, OwnersPart
from exporter.owners.procfs import census_text, root_problem
from exporter.owners.source import OwnerSource
from exporter.pods.part import PODS


def options_for(b: Build[OwnersOptions]) -> OwnersOptions:
    """The options as read, or, simulated with the procfs left at /proc, the simulated node's
    processes and users, and no engine asked."""
    options = b.options
    if b.context.procfs is None or options.procfs != DEFAULT_PROCFS:
        return options
    passwd = options.passwd if options.passwd is not None else b.context.passwd
    return replace(options, procfs=b.context.procfs, passwd=passwd, docker_socket=None, podman_socket=None, containerd_socket=None)


def build(b: Build[OwnersOptions]) -> Source | None:
    if not b.on("owners"):
        return None

    def processes() -> Sequence[ProcessSample]:
        devices = b.context.latest().get(DEVICES)
        return devices.processes if devices is not None else ()

    source = OwnerSource(options_for(b), b.health, processes, max_age=b.max_age)

    def make(earlier: Snapshot) -> OwnersPart:
        devices, pods = earlier.get(DEVICES), earlier.get(PODS)
        if devices is None:
            return source.part(())
        return source.part(devices.processes, devices.chips, pods.chips if pods is not None else ())

    return Derived(OWNERS.name, make, source)


def describe(b: Build[OwnersOptions], source: Source | None) -> str:
    """What it can see on this machine: the procfs root and the runtimes holding its processes,
    the engines' sockets (answering or why not), the Slurm mapping."""
    options = options_for(b)
    if options.procfs != b.options.procfs:
        return f"the simulated node's processes (cgroups under {options.procfs}, users in {options.passwd})"
    problem = root_problem(options.procfs)
    held = f"{problem[1]}: every process is the host's" if problem else census_text(options.procfs)
    seen = [f"cgroups under {options.procfs} ({held})"]
    for runtime, socket in (
        ("docker", options.docker_socket),
        ("podman", options.podman_socket),
        ("containerd", options.containerd_socket),
    ):
        if socket is not None:
            why = socket_problem(socket)
            seen.append(f"{runtime} names: {socket}" + (f" ({why}: ids only)" if why else ""))
    if options.slurm_mapping_dir is not None:
        found = os.path.isdir(options.slurm_mapping_dir)
        seen.append(f"slurm mapping: {options.slurm_mapping_dir}" + ("" if found else " (not there)"))
    seen.append(f"users: {options.passwd or 'the system user database'}")
    return "; ".join(seen)


SWITCH = Switch("owners", "who holds each chip (Kubernetes, Docker, containerd, Podman, Slurm, systemd), from its processes' cgroups")
REGISTRATION = Registration(
    OWNERS,
    build,
    (Collect(SWITCH.name, OwnerCollector),),
    OWNERS_OPTIONS,
    (SWITCH,),
    describe,
    needs=(DEVICES.name,),
    notes=(OWNER_NOTE,),
)
