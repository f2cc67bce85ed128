"""check-config says what the owner source can see on this machine: the procfs root (or why not),
each engine's socket (or that it is not there), the Slurm mapping directory and the users' source;
it runs no program, so it adds nothing to the missing-tool check."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.owners.procfs import census_text
from tests.support.owners import procfs_tree, silent_socket

STAND_IN = shutil.which("true")


def owners_line(capsys: pytest.CaptureFixture[str], config: Path) -> str:
    assert main(["check-config", str(config)]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("collector.owners:"))


def test_it_names_what_it_can_see(tmp_path: Path, sock_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The runtimes holding the processes under the procfs root (counted from their cgroups),
    each engine's socket answering or why not, the mapping directory and the users' source."""
    docker = silent_socket(sock_dir / "docker.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_dir / "containerd.sock"))  # bound, never listened on: refused
    layouts = {
        101: "v2-docker-systemd-cgroupns__docker-20.10.0__1",
        102: "v1-slurm__slurm-21__1",
        103: "v2-slurm__unknown__1",
        104: "v1-host__unknown__1",
    }
    proc = procfs_tree(tmp_path / "proc", layouts, stat_of=os.getpid())
    (proc / "self").mkdir()  # not a pid: not counted
    try:
        (tmp_path / "slurm").mkdir()
        config = tmp_path / "c.yaml"
        config.write_text(
            f"npu_smi:\n  path: {STAND_IN}\nowners:\n  procfs: {proc}\n  docker_socket: {sock_dir / 'docker.sock'}\n"
            f"  podman_socket: {sock_dir / 'podman.sock'}\n  containerd_socket: {sock_dir / 'containerd.sock'}\n"
            f"  slurm_mapping_dir: {tmp_path / 'slurm'}\n  passwd: /etc/passwd\n"
        )
        line = owners_line(capsys, config)
    finally:
        docker.close()
        dead.close()
    assert line == (
        f"collector.owners: on, cgroups under {proc} (4 processes: docker 1, slurm 2, host 1); docker names: {sock_dir / 'docker.sock'}; "
        f"podman names: {sock_dir / 'podman.sock'} (not there: ids only); containerd names: {sock_dir / 'containerd.sock'} (refused: ids only); "
        f"slurm mapping: {tmp_path / 'slurm'}; users: /etc/passwd"
    )


def test_few_processes_and_none(tmp_path: Path) -> None:
    """A container's own /proc shows a handful; a directory of no process says so."""
    proc = procfs_tree(tmp_path / "proc", {7: "v2-host-init__crio-1.22__1", 8: "v2-host-init__crio-1.22__1"}, stat_of=os.getpid())
    assert census_text(str(proc), limit=1) == "the first 1 processes: host 1"
    assert census_text(str(proc)) == "2 processes: host 2"
    assert census_text(str(tmp_path / "slurm-less")) == "no process there: not a procfs"


def test_a_root_it_cannot_read_and_the_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        f"npu_smi:\n  path: {STAND_IN}\nowners:\n  procfs: {tmp_path / 'host-proc'}\n  docker_socket: ''\n  podman_socket: ''\n  containerd_socket: ''\n"
    )
    line = owners_line(capsys, config)
    assert line == (
        f"collector.owners: on, cgroups under {tmp_path / 'host-proc'} ({tmp_path / 'host-proc'} is not a directory: "
        "every process is the host's); users: the system user database"
    )
    config.write_text(f"npu_smi:\n  path: {STAND_IN}\ncollector:\n  owners: false\n")
    assert owners_line(capsys, config) == "collector.owners: off"


def test_the_simulated_nodes_processes_under_the_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The simulator's process rows name pids of no process here: the simulated node's own
    procfs tree is read instead (and its users), while owners.procfs is left at /proc."""
    config = tmp_path / "c.yaml"
    config.write_text("simulator:\n  scenario: healthy\n")
    line = owners_line(capsys, config)
    assert line.startswith("collector.owners: on, the simulated node's processes (cgroups under ") and "simulator/procfs/910b3" in line
    config.write_text(
        f"simulator:\n  scenario: healthy\nowners:\n  procfs: {tmp_path}\n  docker_socket: ''\n  podman_socket: ''\n  containerd_socket: ''\n"
    )
    assert owners_line(capsys, config) == (
        f"collector.owners: on, cgroups under {tmp_path} (no process there: not a procfs); users: the system user database"
    )
