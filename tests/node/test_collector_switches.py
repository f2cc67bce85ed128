"""`collector.NAME` off: the collector's families are not even described, and its source never
runs. Counted on recording stand-ins (npu-smi and hccn_tool scripts that log every call, a fake
kubelet that counts requests) with every source configured to run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from exporter.app.catalogue import ALL_METRICS
from exporter.app.settings import TABLE, build_settings
from exporter.cli import main
from exporter.core.metric import MetricSpec
from exporter.core.selfmetrics import SELF_METRICS, STATUS
from exporter.hccn.metrics import NETWORK_METRICS
from exporter.jobs.store import IngestStore
from exporter.node.assembly import Node, assemble
from exporter.pods.podresources_pb import api_pb2 as pb
from exporter.resources.metrics import RESOURCE_METRICS
from exporter.resources.part import RESOURCES
from tests.support.hccn import calls as hccn_calls
from tests.support.hccn import write_replay_hccn
from tests.support.kubelet import FakeKubelet, container, pod
from tests.support.profile_exports import PT_LEVEL1, build
from tests.support.replay import calls as npu_smi_calls
from tests.support.replay import write_replay_npu_smi
from tests.support.table import chip_switches

# Each switch's families, from the registrations that declare collectors under it.
NAMES = tuple(switch.name for registration in TABLE for switch in registration.switches)
FAMILIES: dict[str, tuple[MetricSpec, ...]] = {
    name: tuple(spec for registration in TABLE for c in registration.collectors if c.switch == name for spec in c.make().specs)
    for name in NAMES
}


class Stage:
    """Every source ready to run, each counting what it is asked."""

    def __init__(self, root: Path, kubelet: FakeKubelet) -> None:
        self.root, self.kubelet = root, kubelet
        (root / "npu").mkdir()
        (root / "hccn").mkdir()
        self.npu_smi = write_replay_npu_smi(
            root / "npu",
            {
                "info": "info__910B3__25.5.1__1",
                "info -m": "info-m__910B3__25.5.1__1",
                "info -t usages -i *": "info-t-usages__910B3__25.5.1__1",
                "info -t ecc -i *": "info-t-ecc__910-doc__unknown__1",
                "info -t board -i * -c *": "info-t-board-chip__910A__23.0.5__1",
            },
        )
        self.hccn_tool = write_replay_hccn(root / "hccn", {"-i * -link -g": "link__unknown__1"})
        self.profiles = root / "profiles"
        build(self.profiles / "r0_ascend_pt", PT_LEVEL1)

    def flags(self, *off: str) -> dict[str, object]:
        return {
            "npu_smi.path": str(self.npu_smi),
            "npu_smi.details": "usages,ecc",
            "npu_smi.board": True,
            "hccn.enabled": True,
            "hccn.path": str(self.hccn_tool),
            "podresources.enabled": True,
            "podresources.socket": str(self.kubelet.socket),
            "profiles.dirs": str(self.profiles),
            "ingest.enabled": True,
            **{f"collector.{name}": False for name in off},
        }

    def run(self, *off: str) -> tuple[Node, str]:
        node = assemble(build_settings(flags=self.flags(*off)))
        asyncio.run(node.sampler.run_once())
        return node, generate_latest(node.registry).decode()


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    kubelet = FakeKubelet(tmp_path / "kubelet.sock")
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[pod("train", "bert-0", container("main", ("huawei.com/Ascend910", ["Ascend910-0"])))]
    )
    kubelet.start()
    try:
        yield Stage(tmp_path, kubelet)
    finally:
        kubelet.stop()


def described(text: str) -> set[str]:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}


def names(specs: tuple[MetricSpec, ...]) -> set[str]:
    return {spec.family_name for spec in specs}


def test_every_switch_has_families_and_every_family_a_switch() -> None:
    assert all(FAMILIES.values()), FAMILIES
    assert {spec.name for specs in FAMILIES.values() for spec in specs} == {spec.name for spec in ALL_METRICS}
    assert {"devices", "processes", "network", "pods", "profiles", "jobs", "self"} <= set(NAMES)


def test_all_on_every_source_runs(stage: Stage) -> None:
    node, text = stage.run()
    assert {"info", "info -m", "info -t usages -i 0", "info -t ecc -i 0"} <= set(npu_smi_calls(stage.root / "npu"))
    assert any(call.startswith("info -t board") for call in npu_smi_calls(stage.root / "npu"))
    assert hccn_calls(stage.root / "hccn") and stage.kubelet.calls >= 1
    assert node.sources.get("profiles") is not None and node.source(IngestStore) is not None
    # Every collector's families are described (those with series under an event, too).
    for name in ("devices", "processes", "network", "pods", "profiles", "jobs"):
        assert names(FAMILIES[name]) & described(text), name
    assert {"process_resident_memory_bytes", "cann_exporter_build_info"} <= described(text)


@pytest.mark.parametrize("off", NAMES)
def test_one_collector_off(stage: Stage, off: str) -> None:
    node, text = stage.run(off)
    assert not names(FAMILIES[off]) & described(text), f"{off}: its families are still described"
    npu_smi = npu_smi_calls(stage.root / "npu")
    if off == "devices":  # the process table still needs `info`; the chip-only reads are skipped
        assert "info" in npu_smi and not [c for c in npu_smi if c.startswith("info -t")]
    elif off == "network":
        assert hccn_calls(stage.root / "hccn") == [] and "network" not in node.sources
    elif off == "pods":
        assert stage.kubelet.calls == 0 and "pods" not in node.sources
    elif off == "profiles":
        assert "profiles" not in node.sources and "profiles" not in {s.name for s in node.publisher.sampled.get(STATUS).sources}
    elif off == "jobs":
        assert node.source(IngestStore) is None
    elif off == "self":
        assert node.publisher.sampled.get(RESOURCES) is None
    # Everything else still runs.
    for name in set(NAMES) - {off}:
        assert names(FAMILIES[name]) & described(text), name


def test_npu_smi_never_runs_when_nothing_needs_it(stage: Stage) -> None:
    _, text = stage.run(*chip_switches())
    assert npu_smi_calls(stage.root / "npu") == [] and hccn_calls(stage.root / "hccn") == [] and stage.kubelet.calls == 0
    assert "npu_profile_compute_ratio" in described(text)  # the profiles are still read


def test_once_honours_them_with_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["once", "--simulate", "healthy", "--no-collector.network", "--no-collector.self", "--log.level", "error"]) == 0
    text = capsys.readouterr().out
    assert "npu_up" in described(text)
    assert not (names(NETWORK_METRICS) | names(SELF_METRICS) | names(RESOURCE_METRICS)) & described(text)
