"""`cann-exporter once` with a replayed npu-smi whose process rows name the pids of processes
this test started: each chip's owner from a procfs tree of real cgroup files (the processes'
own stat and status), Docker and containerd stand-ins naming a container each, and a Slurm
mapping; then from the real /proc, where the processes' cgroups are this machine's."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.owners.parse import parse_cgroup
from tests.support.exposition import samples, value
from tests.support.owners import PIDS_910B3, FakeContainerd, engine_thread, procfs_tree
from tests.support.paths import NPU_SMI_FIXTURES
from tests.support.replay import write_replay_npu_smi

DOCKER_ID = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"
CONTAINERD_ID = "4a8c7d2e9b1f06355e7d1c2b8a9f0e3d6c5b4a3928170f6e5d4c3b2a19087f6e"
LAYOUTS = (
    "v2-kubernetes-systemd-containerd__containerd-1.6.4__1",
    "v1-docker-systemd__unknown__1",
    "v2-podman-rootless__unknown__1",
    "v1-slurm__slurm-21__1",
    "v2-slurm__unknown__1",
    "v2-systemd-service__written",
    "v1-containerd-cgroupfs__written",
    "v1-host__unknown__1",
)
QUIET = ["--npu-smi.details=", "--no-npu-smi.board", "--no-collector.self", "--log.level", "error"]


@pytest.fixture
def sleepers() -> Iterator[list[int]]:
    procs = [subprocess.Popen([shutil.which("sleep") or "sleep", "60"]) for _ in PIDS_910B3]
    try:
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def npu_smi_showing(directory: Path, pids: list[int]) -> Path:
    """The real 910B3 overview with its process rows' pids replaced by ``pids`` (same columns)."""
    text = (NPU_SMI_FIXTURES / "info__910B3__25.5.1__1.txt").read_text()
    for old, new in zip(PIDS_910B3, pids, strict=True):
        assert len(str(new)) <= len(str(old)) and text.count(f" {old} ") == 1
        text = text.replace(f" {old} ", f" {str(new).ljust(len(str(old)))} ")
    (directory / "info.txt").write_text(text)
    return write_replay_npu_smi(directory, {"info": directory / "info.txt", "info -m": "info-m__910B3__25.5.1__1"})


def once(capsys: pytest.CaptureFixture[str], npu_smi: Path, *flags: str) -> dict:
    assert main(["once", "--npu-smi", str(npu_smi), *QUIET, *flags]) == 0
    return samples(capsys.readouterr().out)


def test_once_shows_each_chips_owner(tmp_path: Path, sock_dir: Path, sleepers: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    npu_smi = npu_smi_showing(tmp_path, sleepers)
    tree = procfs_tree(tmp_path / "proc", dict(zip(sleepers, LAYOUTS, strict=True)), live=True)
    (tmp_path / "passwd").write_text("alice:x:7319:100::/home/alice:/bin/sh\n")
    mapping = tmp_path / "slurm"
    mapping.mkdir()
    (mapping / "7").write_text("5150\n")  # a job a prolog gave chip 7, whose process is the host's
    containerd = FakeContainerd(sock_dir / "containerd.sock", {"default": {CONTAINERD_ID: {"nerdctl/name": "vllm-serve"}}})
    with engine_thread(sock_dir / "docker.sock", {DOCKER_ID: "bert-infer"}) as engine, containerd:
        found = once(
            capsys,
            npu_smi,
            *("--owners.procfs", str(tree), "--owners.docker-socket", str(sock_dir / "docker.sock")),
            *("--owners.containerd-socket", str(sock_dir / "containerd.sock"), "--owners.podman-socket="),
            *("--owners.passwd", str(tmp_path / "passwd"), "--owners.slurm-mapping-dir", str(mapping)),
        )
    assert engine.asked == [DOCKER_ID] and containerd.asked == [("default", CONTAINERD_ID)]
    owners = {
        (labels["npu"], labels["runtime"], labels["owner"])
        for (name, ls), _ in found.items()
        if name == "npu_chip_owner_info"
        for labels in [dict(ls)]
    }
    assert owners == {
        ("0", "kubernetes", "pod 9493223b-520e-4a97-a45f-359dcf967006"),
        ("1", "docker", "bert-infer"),
        ("2", "podman", "3f05ee050f82"),
        ("3", "slurm", "slurm job 748468 (alice)"),
        ("4", "slurm", f"slurm job 1392969 ({owner_of(sleepers[4])})"),  # v2: its uid from its real status
        ("5", "systemd", "llm-serving.service"),
        ("6", "containerd", "vllm-serve"),
        ("7", "host", "host"),
        ("7", "slurm", "slurm job 5150"),
    }
    assert value(found, "npu_chip_owner_info", npu="1", container=DOCKER_ID, device="1", chip="0") == 1
    assert value(found, "cann_exporter_owner_pids_skipped_total", reason="vanished") == 0


def owner_of(pid: int) -> str:
    """The user name of a live process's real uid, as the source finds it (passwd file given: the
    number when the file does not name it)."""
    uid = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:"))
    return "alice" if uid == "7319" else uid


def test_once_on_the_real_proc(tmp_path: Path, sleepers: list[int], capsys: pytest.CaptureFixture[str]) -> None:
    """The started processes' real cgroups, as the kernel writes them here."""
    expected = parse_cgroup(Path(f"/proc/{sleepers[0]}/cgroup").read_text())
    found = once(
        capsys,
        npu_smi_showing(tmp_path, sleepers),
        "--owners.procfs",
        "/proc",
        "--owners.docker-socket=",
        "--owners.podman-socket=",
        "--owners.containerd-socket=",
    )
    runtimes = {dict(ls)["npu"]: dict(ls)["runtime"] for (name, ls), _ in found.items() if name == "npu_chip_owner_info"}
    assert runtimes == {str(n): expected.runtime for n in range(8)}
