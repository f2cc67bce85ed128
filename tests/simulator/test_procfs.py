"""Each model's procfs tree (exporter/simulator/procfs, shipped with the package): what
simulator/procfs.py makes of the model, the processes `npu-smi info` prints on the healthy
node with an owner's cgroup each, read by the owner source as the chips' owners."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.node.simulate import passwd_file, procfs_tree
from exporter.owners.hostfiles import read_passwd
from exporter.owners.parse import RUNTIMES, CgroupOwner
from exporter.owners.procfs import read_owner, start_time
from exporter.simulator import procfs, render
from exporter.simulator.models import MODEL_NAMES, MODELS
from exporter.simulator.scenarios import simulate


def shipped(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="ascii") for p in root.rglob("*") if p.is_file()}


def test_the_shipped_trees_are_the_models() -> None:
    """A changed model fails here: `python -m exporter.simulator.procfs` writes the trees again."""
    assert {p.name for p in procfs.TREES.iterdir()} == set(MODEL_NAMES)
    for name, model in MODELS.items():
        assert shipped(procfs.TREES / name) == procfs.tree(model), name
    assert procfs.PASSWD.read_text(encoding="ascii") == procfs.passwd()


def test_written_trees_equal_the_shipped_ones(tmp_path: Path) -> None:
    assert procfs.main([str(tmp_path)]) == 0
    assert shipped(tmp_path / "procfs") == shipped(procfs.TREES)
    assert (tmp_path / "passwd").read_text(encoding="ascii") == procfs.PASSWD.read_text(encoding="ascii")


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("scenario", ["healthy", "underutilized", "degraded"])
def test_every_pid_npu_smi_prints_is_in_the_tree(name: str, scenario: str) -> None:
    """At any time: the pids depend on the model and chip, not on the clock."""
    overview = render.render_info(simulate(MODELS[name], scenario, 1_780_000_000.0))
    rows = [cells for line in overview.splitlines() if len(cells := [c.strip() for c in line.split("|")]) == 6 and cells[2].isdigit()]
    assert rows
    root = procfs.TREES / name
    assert {int(cells[2]) for cells in rows} <= {int(p.name) for p in root.iterdir()}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_owner_source_reads_one_of_each_runtime(name: str) -> None:
    """Every runtime the source tells apart holds a chip, each pid with a start time (the
    pid-start cache), Slurm steps with their users."""
    root = str(procfs.TREES / name)
    users = read_passwd(str(procfs.PASSWD))
    found: dict[str, CgroupOwner] = {}
    for process in simulate(MODELS[name], "healthy", 0.0).processes:
        owner = read_owner(root, process.pid, start_time(root, process.pid)).owner
        found.setdefault(owner.runtime, owner)
    assert set(found) == set(RUNTIMES)
    slurm = found["slurm"]
    assert (slurm.job_id, slurm.step, users[slurm.uid or 0]) == ("4242", "0", "alice")
    assert found["systemd"].unit == "mindie.service"
    assert found["kubernetes"].pod_uid == "3f2a6c1e-8b4d-4e2a-9c7f-5d1e0b6a4c21"


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_the_exporter_finds_each_tree_without_the_simulator(name: str) -> None:
    assert Path(procfs_tree(name)) == (procfs.TREES / name).resolve()
    assert Path(passwd_file()) == procfs.PASSWD.resolve()
