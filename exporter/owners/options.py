"""`owners.*`: where the processes' cgroups are read, which engines are asked for container
names, where Slurm users' names and a prolog's chip-to-job files are found."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import option, optional_text, parse_duration, parse_text
from exporter.core.registration import Section

DEFAULT_PROCFS = "/proc"  # left so under --simulate, the simulated node's own processes are read instead


@dataclass(frozen=True)
class OwnersOptions:
    procfs: str = option(
        DEFAULT_PROCFS,
        parse_text,
        "where each process's cgroup is read (in a container: the host's /proc mounted, e.g. /host/proc; "
        "simulated: its node's tree while /proc)",
        metavar="PATH",
    )
    interval: float = option(
        "10s", parse_duration, "how often the owners of npu-smi's processes are read", metavar="DURATION", serve_only=True
    )
    docker_socket: str | None = option(
        "/var/run/docker.sock",
        optional_text,
        "Docker Engine API socket, asked for container names (not there: ids only; empty: never asked)",
        metavar="PATH",
    )
    podman_socket: str | None = option(
        "/run/podman/podman.sock",
        optional_text,
        "Podman's API socket (Docker's form), asked for container names (not there: ids only; empty: never asked)",
        metavar="PATH",
    )
    containerd_socket: str | None = option(
        "/run/containerd/containerd.sock",
        optional_text,
        "containerd's socket, asked for its containers' name labels (not there: ids only; empty: never asked)",
        metavar="PATH",
    )
    timeout: float = option("2s", parse_duration, "bound on one container-name request or user lookup", metavar="DURATION")
    passwd: str | None = option(
        None,
        optional_text,
        "passwd file naming Slurm jobs' users (e.g. the host's /etc/passwd mounted; unset: the system's user database)",
        metavar="PATH",
    )
    slurm_mapping_dir: str | None = option(
        None,
        optional_text,
        "directory where a Slurm prolog writes one file per chip logic id holding its job ids (unset: not read)",
        metavar="DIR",
    )


OWNERS_OPTIONS = Section("owners", OwnersOptions)
