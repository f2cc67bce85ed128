"""check-config says what the owner source can see on this machine: the procfs root (or why not),
each engine's socket (or that it is not there), the Slurm mapping directory and the users' source;
it runs no program, so it adds nothing to the missing-tool check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from exporter.cli import main
from tests.support.owners import silent_socket

STAND_IN = shutil.which("true")


def owners_line(capsys: pytest.CaptureFixture[str], config: Path) -> str:
    assert main(["check-config", str(config)]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("collector.owners:"))


def test_it_names_what_it_can_see(tmp_path: Path, sock_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docker = silent_socket(sock_dir / "docker.sock")
    try:
        (tmp_path / "slurm").mkdir()
        config = tmp_path / "c.yaml"
        config.write_text(
            f"npu_smi:\n  path: {STAND_IN}\nowners:\n  procfs: {tmp_path}\n  docker_socket: {sock_dir / 'docker.sock'}\n"
            f"  podman_socket: {sock_dir / 'podman.sock'}\n  containerd_socket: ''\n  slurm_mapping_dir: {tmp_path / 'slurm'}\n  passwd: /etc/passwd\n"
        )
        line = owners_line(capsys, config)
    finally:
        docker.close()
    assert line == (
        f"collector.owners: on, cgroups under {tmp_path}; docker names: {sock_dir / 'docker.sock'}; "
        f"podman names: {sock_dir / 'podman.sock'} (not there: ids only); slurm mapping: {tmp_path / 'slurm'}; users: /etc/passwd"
    )


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
    assert owners_line(capsys, config) == f"collector.owners: on, cgroups under {tmp_path}; users: the system user database"
