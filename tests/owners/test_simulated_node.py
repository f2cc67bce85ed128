"""Issue 43's Done-when, on the built-in simulator: a simulated node with a Kubernetes pod, a
Slurm job and a Docker container on three chips (and the other runtimes on the rest) names each
owner in npu_chip_owner_info, read from the model's procfs tree; with the host's /proc unreadable
the chips are still served, one warning says why, and the owner source's health says so too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.cli import main
from tests.support.exposition import Samples, samples, value

pytestmark = pytest.mark.timeout(120)
QUIET = ["--npu-smi.details=", "--no-npu-smi.board", "--no-hccn.enabled"]


def once(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[Samples, str]:
    assert main(["once", "--simulate", "underutilized", *QUIET, *flags]) == 0
    out, err = capsys.readouterr()
    return samples(out), err


def owners(found: Samples) -> dict[str, tuple[str, str]]:
    by_npu = {}
    for (name, labels), _ in found.items():
        if name == "npu_chip_owner_info":
            seen = dict(labels)
            by_npu[seen["npu"]] = (seen["runtime"], seen["owner"])
    return by_npu


def test_each_owner_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    found, _ = once(capsys, "--log.level", "error")
    assert owners(found) == {
        "0": ("kubernetes", "pod 3f2a6c1e-8b4d-4e2a-9c7f-5d1e0b6a4c21"),
        "1": ("slurm", "slurm job 4242 (alice)"),  # underutilized's low chip: the page names the job and user
        "2": ("docker", "d0c4d0c4d0c4"),  # no engine asked: the simulated container is none of this machine's
        "3": ("containerd", "c7d2c7d2c7d2"),
        "4": ("podman", "9a0d9a0d9a0d"),
        "5": ("systemd", "mindie.service"),
        "6": ("host", "host"),
        "7": ("slurm", "slurm job 4243 (bob)"),
    }
    assert value(found, "npu_chip_owner_info", npu="1", job_id="4242", user="alice", runtime="slurm") == 1
    assert value(found, "cann_exporter_source_success", source="owners") == 1
    assert value(found, "cann_exporter_owner_pids_skipped_total", reason="vanished") == 0


def unreadable(tmp_path: Path) -> list[tuple[Path, str]]:
    """Roots the source cannot list: missing, and (not as root) without permission."""
    roots = [(tmp_path / "host-proc", "not_found")]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0)
        roots.append((locked, "permission_denied"))
    return roots


def test_without_the_hosts_proc_the_chips_are_served(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for root, reason in unreadable(tmp_path):
        found, err = once(capsys, "--owners.procfs", str(root), "--log.level", "warning")
        up = {dict(labels)["npu"]: v for (name, labels), v in found.items() if name == "npu_up"}
        assert up == {str(n): 1.0 for n in range(8)}
        assert set(owners(found).values()) == {("host", "host")}
        assert value(found, "cann_exporter_source_success", source="owners") == 0
        assert value(found, "cann_exporter_source_subject_failing", source="owners", subject=str(root), reason=reason) == 1
        warnings = [line for line in err.splitlines() if "level=warning" in line and "SIMULATED" not in line]
        assert len(warnings) == 1 and "source=owners" in warnings[0] and f"reason={reason}" in warnings[0], err
