"""Chips matched to pods and rendered (plain data), and the whole path: simulator + real kubelet socket -> /metrics text."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app.settings import build_settings
from exporter.core.health import HealthRegistry
from exporter.node.assembly import assemble
from exporter.npusmi.part import ChipSample
from exporter.pods.collector import PodCollector
from exporter.pods.kubelet import PodAttribution
from exporter.pods.options import PodsOptions
from exporter.pods.part import ChipPod, match
from exporter.pods.podresources_pb import api_pb2 as pb
from exporter.pods.source import PodResourcesSource
from tests.support.exposition import exposition
from tests.support.kubelet import FakeKubelet, container, pod
from tests.support.tools import tool


def chip(npu: int, idx: int, device: int | None, phy: int | None = None) -> ChipSample:
    return ChipSample(npu=npu, chip=idx, device=device, up=True, phy_id=phy)


EIGHT = tuple(chip(n, 0, n) for n in range(8))
NO_SKIPS = {"unknown_resource": 0, "bad_device_id": 0}


def att(
    device: int, pod_name: str = "p", container_name: str = "c", ns: str = "ns", resource: str = "huawei.com/Ascend910"
) -> PodAttribution:
    return PodAttribution(device, ns, pod_name, container_name, resource, f"Ascend910-{device}")


def render(attributions, chips, match_on: str = "physical") -> dict[str, list]:
    text = exposition(PodCollector(), match(attributions, chips, match_on, NO_SKIPS).part)
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def pod_info(samples: dict[str, list]) -> set[tuple[str, ...]]:
    return {tuple(s.labels[k] for k in ("npu", "chip", "device", "namespace", "pod", "container")) for s in samples.get("npu_pod_info", [])}


def unmatched(samples: dict[str, list]) -> dict[str, float]:
    return {s.labels["reason"]: s.value for s in samples["cann_exporter_podresources_unmatched_devices"]}


def test_chips_get_their_pods() -> None:
    out = render([att(0, "a"), att(3, "b"), att(3, "b")], EIGHT)
    assert pod_info(out) == {("0", "0", "0", "ns", "a", "c"), ("3", "0", "3", "ns", "b", "c")}
    assert all(s.value == 1 for s in out["npu_pod_info"])
    assert unmatched(out) == {"no_chip": 0, "bad_device_id": 0, "unknown_resource": 0}


def test_no_attribution_no_series() -> None:
    out = render([], EIGHT)
    assert pod_info(out) == set()


async def answered(attributions: list[PodAttribution]) -> PodResourcesSource:
    """A source whose kubelet answered with ``attributions``."""
    response = pb.ListPodResourcesResponse(
        pod_resources=[pod(a.namespace, a.pod, container(a.container, (a.resource_name, [a.device_id]))) for a in attributions]
    )

    async def fetch(socket: str, timeout: float, limit: int) -> object:
        return response

    source = PodResourcesSource(PodsOptions(), HealthRegistry(), fetch=fetch)
    await source.refresh()
    return source


async def test_devices_matching_no_chip_are_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    source = await answered([att(1, "ok"), att(9, "ghost"), att(12, "ghost")])
    with caplog.at_level(logging.WARNING, logger="exporter.pods"):
        part = source.part(EIGHT)
        source.part(EIGHT)
    assert part.chips == (ChipPod(1, 0, 1, "ns", "ok", "c"),)
    assert dict(part.unmatched)["no_chip"] == 2
    logged = [r for r in caplog.records if r.name == "exporter.pods"]
    assert sorted(r.device_id for r in logged) == ["Ascend910-12", "Ascend910-9"]


async def test_no_chips_yet_counts_but_does_not_log(caplog: pytest.LogCaptureFixture) -> None:
    source = await answered([att(0)])
    with caplog.at_level(logging.WARNING, logger="exporter.pods"):
        part = source.part(())
    assert dict(part.unmatched)["no_chip"] == 1
    assert not [r for r in caplog.records if r.name == "exporter.pods"]


def test_physical_ids_where_npu_smi_knows_them() -> None:
    # A3: two dies per NPU; Phy-ID and logic id differ here on purpose.
    chips = (chip(0, 0, 0, phy=8), chip(0, 1, 1, phy=9), chip(1, 0, 2, phy=0))
    out = render([att(9, "die"), att(0, "first")], chips)
    assert pod_info(out) == {("0", "1", "1", "ns", "die", "c"), ("1", "0", "2", "ns", "first", "c")}
    out = render([att(9, "die"), att(0, "first")], chips, match_on="logic")
    assert pod_info(out) == {("0", "0", "0", "ns", "first", "c")}
    assert unmatched(out)["no_chip"] == 1


def test_chip_without_logic_id_is_never_matched() -> None:
    out = render([att(0)], (chip(0, 0, None),))
    assert pod_info(out) == set()
    assert unmatched(out)["no_chip"] == 1


def test_shared_chip_lists_every_pod() -> None:
    slices = [PodAttribution(2, "ns", f"svc-{i}", "app", "huawei.com/Ascend910-2c", f"Ascend910-2c-{100 + i}-2", 100 + i) for i in range(3)]
    out = render(slices, EIGHT)
    assert pod_info(out) == {("2", "0", "2", "ns", f"svc-{i}", "app") for i in range(3)}


def test_bad_match_on() -> None:
    with pytest.raises(ValueError):
        PodResourcesSource(PodsOptions(device_id="uuid"), HealthRegistry())


# --- the whole path -----------------------------------------------------------------------------


def families(registry: CollectorRegistry) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(generate_latest(registry).decode())}


def chip_series(fams: dict[str, list]) -> dict[str, list]:
    return {name: samples for name, samples in fams.items() if name.startswith("npu_") and name != "npu_pod_info"}


async def test_end_to_end_on_the_simulator(kubelet: FakeKubelet, sock_dir: Path) -> None:
    """The real wiring (podresources.* settings): a sampler task + PodCollector beside the device collectors."""
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[
            pod("train", "llama-0", container("main", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"]))),
            pod("train", "ghost", container("main", ("huawei.com/Ascend910", ["Ascend910-42"]))),
            pod("x", "odd", container("c", ("huawei.com/npu-core", ["npu-core-0"]))),
        ]
    )
    kubelet.start()

    def build(socket: Path):
        return assemble(
            build_settings(
                flags={
                    "simulator.scenario": "healthy",
                    "npu_smi.details": "",
                    "hccn.enabled": "false",  # the network's calls are no part of the wiring checked here
                    "podresources.enabled": "true",
                    "podresources.socket": str(socket),
                    "podresources.timeout": "1s",
                }
            )
        )

    alive = build(kubelet.socket)
    await alive.sampler.run_once()
    fams = families(alive.registry)
    assert pod_info(fams) == {("0", "0", "0", "train", "llama-0", "main"), ("1", "0", "1", "train", "llama-0", "main")}
    assert unmatched(fams) == {"no_chip": 1, "bad_device_id": 0, "unknown_resource": 1}
    success = {s.labels["source"]: s.value for s in fams["cann_exporter_source_success"]}
    assert success["podresources"] == 1 and success["npu_smi_info"] == 1
    assert "podresources" in {s.labels["source"] for s in fams["cann_exporter_source_duration_seconds"]}

    # A dead kubelet: no attribution, the failure in self-metrics, chip metrics unaffected.
    dead = build(sock_dir / "missing.sock")
    await dead.sampler.run_once()
    dead_fams = families(dead.registry)
    assert pod_info(dead_fams) == set()
    errors = {(s.labels["source"], s.labels["reason"]): s.value for s in dead_fams["cann_exporter_source_errors"]}
    assert errors[("podresources", "not_found")] == 1
    assert {s.labels["source"]: s.value for s in dead_fams["cann_exporter_source_success"]}["podresources"] == 0

    def labels_of(fams):
        return {n: sorted(tuple(sorted(s.labels.items())) for s in v) for n, v in chip_series(fams).items()}

    def owners(fams):
        return {s.labels["npu"]: s.labels["owner"] for s in fams["npu_chip_owner_info"]}

    # Only the pod's owner changes: its name comes from the kubelet; without one, its UID (cgroup).
    alive_owners, dead_owners = owners(fams), owners(dead_fams)
    assert alive_owners["0"] == "train/llama-0"
    assert dead_owners["0"].startswith("pod ") and len(dead_owners["0"]) > len("pod ")
    assert {k: v for k, v in dead_owners.items() if k != "0"} == {k: v for k, v in alive_owners.items() if k != "0"}
    unowned = {n: v for n, v in labels_of(dead_fams).items() if n != "npu_chip_owner_info"}
    assert unowned == {n: v for n, v in labels_of(fams).items() if n != "npu_chip_owner_info"}
    assert dead.publisher.current.ready

    # Last, so a machine without promtool still ran everything above before the skip.
    text = generate_latest(alive.registry)
    proc = subprocess.run([tool("promtool"), "check", "metrics"], input=text, capture_output=True, timeout=30)
    problems = [line for line in (proc.stdout + proc.stderr).decode().splitlines() if line.strip()]
    assert (proc.returncode, problems) == (0, [])
