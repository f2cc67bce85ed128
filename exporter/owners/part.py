"""The owners part of the snapshot: who holds each chip, one record per chip and owner, and the
pure conversion from what the source read to it.

Every process npu-smi shows on a chip is attributed to its owner (parse.py's CgroupOwner, with
the names the source found: a container's, a user's); processes of one owner on one chip make
one record. A Kubernetes owner takes the pod's name and namespace from the kubelet's
pod-resources (the pods part) when exactly one pod holds that chip; a Slurm mapping directory
adds the jobs a prolog wrote for a chip that no process's cgroup already shows.

Labels are one fixed set for every runtime (as npu_pod_info's and npu_device_info's): a
runtime that has no value for one leaves it empty, which Prometheus reads as absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.core.snapshot import PartKey
from exporter.npusmi.part import ChipSample, ProcessSample
from exporter.owners.parse import CONTAINER_RUNTIMES, KUBERNETES, SLURM, SYSTEMD, CgroupOwner
from exporter.pods.part import ChipPod

MAX_LABEL = 128  # characters of a label value; the rest is cut
_ODD = re.compile(r'[^\x20-\x7e]|["\\]')  # control, non-ASCII, quote and backslash: replaced
SHORT_ID = 12  # a container id shown the way `docker ps` shows it


@dataclass(frozen=True)
class Holder:
    """A process's owner as the source resolved it: the cgroup's record and the names found."""

    name: str  # npu-smi's process name when it was resolved (a pid showing another is not this process)
    owner: CgroupOwner
    container_name: str = ""  # the engine's name for the container, where it answered
    user: str = ""  # the Slurm job's user: the uid's name, or the number


@dataclass(frozen=True)
class ChipOwner:
    """One chip and one owner of the processes on it (or a job a Slurm prolog gave it)."""

    npu: int
    chip: int
    device: int | None
    runtime: str  # kubernetes, docker, containerd, podman, slurm, systemd, host
    owner: str  # one human-readable name: the pod, the container's name or id, `slurm job J (user)`, the unit, `host`
    namespace: str = ""  # kubernetes, from pod-resources
    pod: str = ""  # kubernetes, from pod-resources
    container: str = ""  # the container id the cgroup names (kubernetes, docker, containerd, podman)
    job_id: str = ""  # slurm
    user: str = ""  # slurm
    unit: str = ""  # systemd


@dataclass(frozen=True)
class OwnersPart:
    chips: tuple[ChipOwner, ...] = ()
    skipped: tuple[tuple[str, int], ...] = ()  # (reason, processes) since start, every reason
    lookup_failures: tuple[tuple[str, str, int], ...] = ()  # (runtime, reason, container-name requests) since start


def label_text(value: str) -> str:
    """A label value: printable ASCII (anything else, quotes and backslashes become `_`), at
    most MAX_LABEL characters."""
    text = _ODD.sub("_", value)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 3] + "..."


def short_id(container_id: str) -> str:
    return container_id[:SHORT_ID]


def slurm_owner(job_id: str, user: str) -> str:
    return f"slurm job {job_id} ({user})" if user else f"slurm job {job_id}"


def _one_pod(pods: Iterable[ChipPod]) -> ChipPod | None:
    """The pod holding a chip, when the kubelet names exactly one."""
    distinct = {(pod.namespace, pod.pod): pod for pod in pods}
    return next(iter(distinct.values())) if len(distinct) == 1 else None


def chip_owner(process: ProcessSample, holder: Holder, pods: Iterable[ChipPod]) -> ChipOwner:
    """The record of one process's owner on its chip."""
    owner = holder.owner
    base = (process.npu, process.chip, process.device)
    if owner.runtime == KUBERNETES:
        pod = _one_pod(pods)
        if pod is not None:
            name = f"{pod.namespace}/{pod.pod}"
            return _record(*base, KUBERNETES, name, namespace=pod.namespace, pod=pod.pod, container=owner.container_id)
        return _record(*base, KUBERNETES, f"pod {owner.pod_uid}", container=owner.container_id)
    if owner.runtime in CONTAINER_RUNTIMES:
        name = holder.container_name or short_id(owner.container_id)
        return _record(*base, owner.runtime, name, container=owner.container_id)
    if owner.runtime == SLURM:
        return _record(*base, SLURM, slurm_owner(owner.job_id, holder.user), job_id=owner.job_id, user=holder.user)
    if owner.runtime == SYSTEMD:
        return _record(*base, SYSTEMD, owner.unit, unit=owner.unit)
    return _record(*base, owner.runtime, owner.runtime)


def _record(npu: int, chip: int, device: int | None, runtime: str, owner: str, **labels: str) -> ChipOwner:
    return ChipOwner(npu, chip, device, runtime, label_text(owner), **{key: label_text(value) for key, value in labels.items()})


def chip_owners(
    processes: Iterable[ProcessSample],
    holders: Mapping[int, Holder],
    pods: Iterable[ChipPod] = (),
    chips: Iterable[ChipSample] = (),
    jobs: Mapping[int, tuple[str, ...]] | None = None,
) -> tuple[ChipOwner, ...]:
    """One record per chip and owner: each process's, where the source resolved its pid for the
    process npu-smi shows now (same name), then each job of the Slurm mapping (``jobs``: ids by
    chip logic id) on a chip no process shows that job on."""
    pods_on: dict[tuple[int, int], list[ChipPod]] = {}
    for pod in pods:
        pods_on.setdefault((pod.npu, pod.chip), []).append(pod)
    found: dict[ChipOwner, None] = {}
    for process in processes:
        holder = holders.get(process.pid)
        if holder is not None and holder.name == process.name:
            found.setdefault(chip_owner(process, holder, pods_on.get((process.npu, process.chip), ())))
    shown = {(item.npu, item.chip, item.job_id) for item in found if item.runtime == SLURM}
    by_device = {chip.device: chip for chip in chips if chip.device is not None}
    for device, job_ids in sorted((jobs or {}).items()):
        chip = by_device.get(device)
        if chip is None:
            continue
        for job_id in job_ids:
            if (chip.npu, chip.chip, job_id) not in shown:
                found.setdefault(_record(chip.npu, chip.chip, chip.device, SLURM, slurm_owner(job_id, ""), job_id=job_id))
    return tuple(found)


OWNERS = PartKey("owners", OwnersPart)  # its snapshot key
