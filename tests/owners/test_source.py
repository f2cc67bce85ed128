"""The owner source over procfs trees of real cgroup files: a run's records joined to the chips,
the kubelet's pods and a Slurm mapping; its health when the root cannot be read; its counts; its
part going when its runs stop; the records' labels bounded."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from exporter.core.health import HealthRegistry
from exporter.npusmi.part import ChipSample, ProcessSample
from exporter.owners.collector import OwnerCollector
from exporter.owners.options import OwnersOptions
from exporter.owners.parse import CgroupOwner
from exporter.owners.part import MAX_LABEL, ChipOwner, Holder, OwnersPart, chip_owners, label_text
from exporter.owners.source import OwnerSource
from exporter.pods.part import ChipPod
from tests.support.exposition import exposition, samples, value
from tests.support.owners import EngineStandIn, procfs_tree

CHIPS = tuple(ChipSample(npu=n, chip=0, device=n, up=True) for n in range(4))
DOCKER_ID = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"
LAYOUTS = {
    4101: "v2-kubernetes-systemd-containerd__containerd-1.6.4__1",
    4102: "v1-docker-systemd__unknown__1",
    4103: "v1-slurm__slurm-21__1",
    4104: "v2-systemd-service__written",
}


def processes(*extra: ProcessSample) -> tuple[ProcessSample, ...]:
    rows = tuple(ProcessSample(n, 0, n, pid, "python", 1e9) for n, pid in enumerate(LAYOUTS))
    return rows + extra


def options(tmp_path: Path, **values: Any) -> OwnersOptions:
    return replace(OwnersOptions(procfs=str(tmp_path / "proc"), docker_socket=None, podman_socket=None, containerd_socket=None), **values)


def run(source: OwnerSource) -> None:
    asyncio.run(source.refresh())


def test_a_run_over_real_cgroups(tmp_path: Path) -> None:
    procfs_tree(tmp_path / "proc", LAYOUTS)
    (tmp_path / "passwd").write_text("root:x:0:0::/:/bin/sh\nalice:x:7319:100::/home/alice:/bin/sh\n")
    health = HealthRegistry()
    rows = processes(ProcessSample(1, 0, 1, 4102, "python", 5e8))  # two processes of one container: one record
    source = OwnerSource(options(tmp_path, passwd=str(tmp_path / "passwd")), health, lambda: rows)
    run(source)
    pods = (ChipPod(0, 0, 0, "train", "llama-0", "main"),)
    part = source.part(rows, CHIPS, pods)
    assert part.chips == (
        ChipOwner(
            0,
            0,
            0,
            "kubernetes",
            "train/llama-0",
            "train",
            "llama-0",
            container="25d057a4c6c9555f2a0eb106e8896968c28f1c44aca4754174851aca7f89ad26",
        ),
        ChipOwner(1, 0, 1, "docker", DOCKER_ID[:12], container=DOCKER_ID),
        ChipOwner(2, 0, 2, "slurm", "slurm job 748468 (alice)", job_id="748468", user="alice"),
        ChipOwner(3, 0, 3, "systemd", "llm-serving.service", unit="llm-serving.service"),
    )
    status = health["owners"].status()
    assert status.success and status.subjects == 2  # the procfs root and the passwd file
    found = samples(exposition(OwnerCollector(), part))
    assert value(found, "npu_chip_owner_info", npu="2", runtime="slurm", owner="slurm job 748468 (alice)", user="alice") == 1
    assert value(found, "npu_chip_owner_info", npu="0", pod="llama-0", namespace="train", job_id="", unit="") == 1
    assert value(found, "cann_exporter_owner_pids_skipped_total", reason="vanished") == 0


def test_docker_names_and_a_socket_that_hangs(tmp_path: Path, sock_dir: Path) -> None:
    procfs_tree(tmp_path / "proc", LAYOUTS)
    socket = sock_dir / "docker.sock"
    health = HealthRegistry()
    source = OwnerSource(options(tmp_path, docker_socket=str(socket), timeout=0.3), health, processes)

    async def hung() -> None:
        async with EngineStandIn(socket, {}, hang=(DOCKER_ID,)):
            await source.refresh()

    async def answered() -> None:
        async with EngineStandIn(socket, {DOCKER_ID: "bert-infer"}):
            source.containers._cache.clear()  # as a minute later
            await source.refresh()

    asyncio.run(hung())
    held = source.part(processes(), CHIPS)
    assert [item.owner for item in held.chips if item.runtime == "docker"] == [DOCKER_ID[:12]]  # the id alone
    status = health["owners"].status()
    assert not status.success and status.failing == {str(socket): "timeout"}
    assert ("docker", "timeout", 1) in held.lookup_failures
    asyncio.run(answered())
    named = source.part(processes(), CHIPS)
    assert [item.owner for item in named.chips if item.runtime == "docker"] == ["bert-infer"]
    assert health["owners"].status().success


def test_a_procfs_root_out_of_reach_is_the_host_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    health = HealthRegistry()
    source = OwnerSource(options(tmp_path, procfs=str(tmp_path / "host-proc")), health, processes)
    with caplog.at_level(logging.WARNING):
        run(source)
        run(source)
    part = source.part(processes(), CHIPS)
    assert {(item.npu, item.runtime, item.owner) for item in part.chips} == {(n, "host", "host") for n in range(4)}
    assert health["owners"].status().failing == {str(tmp_path / "host-proc"): "not_found"}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_the_hosts_pids_in_a_containers_proc_warn_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "proc").mkdir()
    source = OwnerSource(options(tmp_path), HealthRegistry(), processes)
    with caplog.at_level(logging.WARNING):
        run(source)
        run(source)
    assert source.part(processes(), CHIPS).chips == ()
    assert dict(source.part(()).skipped)["vanished"] == 8
    assert ["no process npu-smi shows is under owners.procfs" in r.getMessage() for r in caplog.records] == [True]


def test_the_slurm_mapping_fills_what_cgroups_do_not_show(tmp_path: Path) -> None:
    procfs_tree(tmp_path / "proc", {4103: "v1-slurm__slurm-21__1"})
    mapping = tmp_path / "slurm"
    mapping.mkdir()
    (mapping / "2").write_text("748468\n")  # the cgroup shows it already: not twice
    (mapping / "3").write_text("900001\n900002_4\n")
    (mapping / "1").write_text("")  # emptied by the epilog
    (mapping / "README").write_text("not a chip\n")
    rows = (ProcessSample(2, 0, 2, 4103, "python", 1e9),)
    source = OwnerSource(options(tmp_path, slurm_mapping_dir=str(mapping)), HealthRegistry(), lambda: rows)
    run(source)
    owners = {(item.npu, item.job_id, item.owner) for item in source.part(rows, CHIPS).chips}
    assert owners == {(2, "748468", "slurm job 748468 (7319)"), (3, "900001", "slurm job 900001"), (3, "900002_4", "slurm job 900002_4")}
    health = HealthRegistry()
    missing = OwnerSource(options(tmp_path, slurm_mapping_dir=str(tmp_path / "nowhere")), health, lambda: rows)
    run(missing)
    assert health["owners"].status().failing == {str(tmp_path / "nowhere"): "not_found"}


def test_the_part_goes_when_the_runs_stop_and_a_pid_with_another_name_waits(tmp_path: Path) -> None:
    procfs_tree(tmp_path / "proc", LAYOUTS)
    now = [100.0]
    source = OwnerSource(options(tmp_path), HealthRegistry(), processes, max_age=60, clock=lambda: now[0])
    assert source.part(processes(), CHIPS).chips == ()  # not run yet
    run(source)
    assert len(source.part(processes(), CHIPS).chips) == 4
    renamed = tuple(ProcessSample(p.npu, p.chip, p.device, p.pid, "other", None) for p in processes())
    assert source.part(renamed, CHIPS).chips == ()  # npu-smi shows other processes under those pids
    now[0] += 61
    assert source.part(processes(), CHIPS).chips == ()


def test_pods_are_joined_only_when_one_holds_the_chip() -> None:
    owner = CgroupOwner("kubernetes", "f" * 64, "9493223b-520e-4a97-a45f-359dcf967006")
    process = ProcessSample(0, 0, 0, 7, "python", None)
    holders = {7: Holder("python", owner)}
    two = (ChipPod(0, 0, 0, "a", "p1", "main"), ChipPod(0, 0, 0, "b", "p2", "main"), ChipPod(1, 0, 1, "c", "p3", "main"))
    (alone,) = chip_owners([process], holders, two[2:] + two[:1])
    assert (alone.namespace, alone.pod, alone.owner) == ("a", "p1", "a/p1")
    (shared,) = chip_owners([process], holders, two)
    assert (shared.namespace, shared.pod, shared.owner) == ("", "", "pod 9493223b-520e-4a97-a45f-359dcf967006")


def test_labels_are_printable_and_bounded() -> None:
    assert label_text('evil"\x1b[31m\\x2d\u00e9') == "evil__[31m_x2d_"
    long = label_text("y" * 500)
    assert len(long) == MAX_LABEL and long.endswith("...")
    unit = 'evil"\x1b' + "y" * 200 + ".service"
    holders = {7: Holder("python", CgroupOwner("systemd", unit=unit))}
    (item,) = chip_owners([ProcessSample(0, 0, 0, 7, "python", None)], holders)
    assert len(item.owner) == len(item.unit) == MAX_LABEL and item.owner.startswith("evil__yy")
    text = exposition(OwnerCollector(), OwnersPart((item,)))
    assert "\x1b" not in text
