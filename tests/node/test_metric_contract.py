"""The metric contract between parts, specs and collectors.

- Every field a spec names exists in its collector's part, and every field of a part is
  rendered by some spec (or is a label of the series it belongs to): a value the exporter
  reads is never silently dropped, and a spec never names a field nobody fills.
- Every declared metric is produced from real outputs: the npu-smi and hccn_tool fixtures
  through a real subprocess, a real profiler export, a kubelet answer, an ingest batch and a
  web config.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import time
import typing
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app.catalogue import ALL_METRICS
from exporter.app.settings import TABLE, build_settings
from exporter.core.health import HealthRegistry
from exporter.core.metric import MetricSpec
from exporter.core.registration import Simulated
from exporter.core.runner import CommandRunner
from exporter.hccn.collector import NetworkCollector
from exporter.hccn.options import HccnOptions
from exporter.hccn.source import HccnSource
from exporter.jobs.collector import JobCollector
from exporter.jobs.mfu import PeakJoin
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestLimits, parse_batch
from exporter.node.assembly import assemble
from exporter.node.simulate import hccn_tool_command
from exporter.npusmi.part import ChipSample
from exporter.pods.collector import PodCollector
from exporter.pods.options import PodsOptions
from exporter.pods.podresources_pb import api_pb2 as pb
from exporter.pods.source import PodResourcesSource
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.indicators import summarize
from exporter.profiles.load import load_profile
from exporter.profiles.part import ProfilesPart
from exporter.resources.collector import ResourcesCollector
from exporter.resources.source import ResourcesSource
from exporter.web.collector import HttpCollector, WebCollector
from exporter.web.options import WebOptions
from exporter.web.security import WebSecurity
from exporter.web.server import HttpServer
from tests.support.exposition import exposition
from tests.support.hccn import write_replay_hccn
from tests.support.kubelet import container, pod
from tests.support.owners import PIDS_910B3, procfs_tree
from tests.support.paths import FIXTURES
from tests.support.profile_builders import Copy, Kernel, Step, torch_profile
from tests.support.profile_exports import PT_LEVEL1, build
from tests.support.replay import write_replay_npu_smi
from tests.support.tools import tool
from tests.support.webconfig import HASH, write_web_config

# Every collector of the table and the part it renders.
COLLECTORS = {type(c.make()): registration.key.type for registration in TABLE for c in registration.collectors}
# Fields that are labels of the series their record renders (which chip, port, job, source).
LABELS = {"npu", "chip", "device", "port", "lane", "name", "job_name", "rank"}


# --- parts and specs --------------------------------------------------------------------------------


def record_types(hint: object) -> list[type]:
    """The dataclasses a field holds: itself, or the items of a tuple of them."""
    if dataclasses.is_dataclass(hint):
        return [hint]  # type: ignore[list-item]
    return [arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)] + [
        t for arg in typing.get_args(hint) if arg is not Ellipsis for t in record_types(arg) if t is not arg
    ]


def leaf_fields(cls: type, named: set[str]) -> set[str]:
    """Every field of ``cls`` and the records it holds; a record held by a field a spec names is
    rendered by that spec as a whole (ECC counts, network counters, operator shares)."""
    out: set[str] = set()
    for name, hint in typing.get_type_hints(cls).items():
        inner = record_types(hint)
        if inner and name not in named:
            for record in inner:
                out |= leaf_fields(record, named)
        else:
            out.add(name)
    return out


def all_fields(cls: type) -> set[str]:
    out = set()
    for name, hint in typing.get_type_hints(cls).items():
        out.add(name)
        for record in record_types(hint):
            out |= all_fields(record)
    return out


def spec_fields(specs: tuple[MetricSpec, ...]) -> set[str]:
    return {field for spec in specs for field in spec.fields}


def test_every_collector_is_in_this_test_and_every_spec_names_its_fields():
    declared = {spec for collector in COLLECTORS for spec in collector.specs}
    assert declared == set(ALL_METRICS)
    for spec in ALL_METRICS:
        assert spec.fields, f"{spec.name} names no field"


@pytest.mark.parametrize("collector", sorted(COLLECTORS, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_every_named_field_exists(collector):
    part = COLLECTORS[collector]
    missing = spec_fields(collector.specs) - all_fields(part)
    assert not missing, f"{collector.__name__} specs name fields {sorted(missing)} that {part.__name__} lacks"


@pytest.mark.parametrize("part", sorted(set(COLLECTORS.values()), key=lambda p: p.__name__), ids=lambda p: p.__name__)
def test_every_field_of_a_part_is_rendered(part):
    named = spec_fields(tuple(spec for spec in ALL_METRICS))
    unrendered = leaf_fields(part, named) - named - LABELS
    assert not unrendered, f"{part.__name__} fields {sorted(unrendered)} reach no metric"


# --- producers: real outputs in, metrics out --------------------------------------------------------


def node_exposition(**flags: str) -> str:
    """`once` as the CLI runs it, in-process: npu-smi (a replay or the simulator) through real subprocesses."""
    settings = build_settings(flags={"hccn.enabled": "false", "podresources.enabled": "false", **flags})
    node = assemble(settings, ingest=False)
    asyncio.run(node.sampler.run_once())
    return generate_latest(node.registry).decode()


def npu_smi_910b3(tmp_path: Path) -> str:
    script = write_replay_npu_smi(
        tmp_path,
        {
            "info": "info__910B3__25.5.1__1",
            "info -m": "info-m__910B3__25.5.1__1",
            "info -t usages -i *": "info-t-usages__910B3__25.5.1__1",
            "info -t common -i *": "info-t-common__910B3__25.5.1__1",
            "info -t memory -i *": "info-t-memory__910B3__25.5.1__1",
            "info -t ecc -i *": "info-t-ecc__910-doc__unknown__1",
            "info -t board -i * -c *": "info-t-board-chip__910A__23.0.5__1",
        },
    )
    return node_exposition(
        **{
            "npu_smi.path": str(script),
            "npu_smi.details": "usages,common,memory,ecc",
            "npu_smi.expected_devices": "8",
            "npu_smi.sysfs": str(FIXTURES / "sysfs" / "910B3-8card__written"),
        }
    )


def npu_smi_310p(tmp_path: Path) -> str:
    """DDR (310P prints it; 910B does not), and a failing `-t ecc` for the self metrics."""
    script = write_replay_npu_smi(
        tmp_path,
        {
            "info": "info__310P3-300IDuo__24.1.rc2__1",
            "info -t usages -i *": "info-t-usages__310P-300IDuo__unknown__1",
        },
    )
    return node_exposition(**{"npu_smi.path": str(script), "npu_smi.details": "usages,ecc", "npu_smi.board": "false"})


def npu_smi_health(tmp_path: Path) -> str:
    script = write_replay_npu_smi(
        tmp_path,
        {
            "info": "info__310B4__23.0.0__1",
            "info -t health -i 0 -c 0": "info-t-health__910A__23.0.7__2",
        },
    )
    return node_exposition(**{"npu_smi.path": str(script), "npu_smi.details": "health", "npu_smi.board": "false"})


def simulated(tmp_path: Path) -> str:
    return node_exposition(**{"simulator.scenario": "healthy", "npu_smi.details": "", "npu_smi.board": "false"})


def simulated_hardware(tmp_path: Path) -> str:
    """The health and interconnect types: the simulated A3 (two dies per NPU, super pod) answers them all."""
    return node_exposition(
        **{
            "simulator.scenario": "degraded",
            "simulator.model": "a3",
            "npu_smi.details": "volt,pcie-err,sensors,sio-info,hccs,hccs-bw,spod-info",
            "npu_smi.hccs_bw_time": "10ms",
            "npu_smi.board": "false",
        }
    )


def hccn_port(command: tuple[str, ...]) -> str:
    """One 910B3 chip's port, every command asked once."""
    chip = ChipSample(npu=0, chip=0, device=0, up=True, model="910B3")
    source = HccnSource(HccnOptions(), CommandRunner(timeout=10), HealthRegistry(), chips=lambda: (chip,), command=command)

    async def run() -> None:
        await source.refresh_fast()
        await source.refresh_slow()

    asyncio.run(run())
    return exposition(NetworkCollector(), source.part())


def hccn_tool(tmp_path: Path) -> str:
    script = write_replay_hccn(
        tmp_path,
        {
            "-i 0 -link -g": "link__unknown__1",
            "-i 0 -link_stat -g": "link_stat__unknown__3",
            "-i 0 -speed -g": "text:Speed: 100000 Mb/s",
            "-i 0 -net_health -g": "net_health__unknown__2",
            "-i 0 -stat -g": "stat__unknown__1__mangled",
            "-i 0 -optical -g": "optical__910A__1__mangled",
            "-i 0 -bandwidth -g": "bandwidth__950-A5__1",
            "-i 0 -ip -g": "ip__910B3__1",
        },
    )
    return hccn_port((str(script),))


def hccn_tool_simulated(tmp_path: Path) -> str:
    """The one real optical sample says "not present" (it was edited); the simulator prints that
    block as a plugged module does (tests/hccn/test_hccn_simulator.py compares the two)."""
    return hccn_port(hccn_tool_command(Simulated("healthy", "910b3")))


def kubelet(tmp_path: Path) -> str:
    answer = pb.ListPodResourcesResponse(
        pod_resources=[
            pod("train", "llama-0", container("main", ("huawei.com/Ascend910", ["Ascend910-0"]))),
        ]
    )

    async def fetch(socket: str, timeout: float, limit: int) -> object:
        return answer

    source = PodResourcesSource(PodsOptions(), HealthRegistry(), fetch=fetch)
    asyncio.run(source.refresh())
    chips = (ChipSample(npu=0, chip=0, device=0, up=True),)
    return exposition(PodCollector(), source.part(chips))


def ingest(tmp_path: Path) -> str:
    store = IngestStore()
    body = {
        "job_name": "bert",
        "rank": 0,
        "world_size": 2,
        "device": 3,
        "framework": "pytorch",
        "pid": 42,
        "memory": {"allocated_bytes": 1 << 30, "max_allocated_bytes": 2 << 30},
        "precision": "fp16",
        "profiling_seconds": 0.012,
        "steps": [{"duration": 0.5, "samples": 32, "phases": {"compute": 0.3, "h2d": 0.1}, "flops": 5e13}],
    }
    store.accept(parse_batch(json.dumps(body).encode(), IngestLimits(), time.time()))
    store.reject("invalid")
    return exposition(JobCollector(), PeakJoin(store.part, lambda: (("3", "fp16", 2.56e14),)).read())


def profiles(tmp_path: Path) -> str:
    """The real torch_npu sample, and a synthetic one with memory copies of known kinds."""
    real = build(tmp_path / "real" / "r0_ascend_pt", PT_LEVEL1)
    copies = torch_profile(
        tmp_path / "copies" / "r1_ascend_pt",
        rank=1,
        steps=[Step(1, 600.0, 100.0, 300.0, preparing=50.0)],
        kernels=[Kernel(1, "MatMul_1", "MatMul", "AI_CORE", 600.0)],
        host_steps=[(1, 0.0, 1000.0)],
        copies=[Copy(10.0, 150.0, operation="Host To Device")],
    )
    summaries = [
        s
        for path, producer in ((real, "torch_npu"), (copies, "torch_npu"))
        for data in load_profile(path, producer, "job")
        for s in summarize(data)
    ]
    return exposition(ProfileCollector(), ProfilesPart.latest(summaries))


def web(tmp_path: Path) -> str:
    security = WebSecurity.from_file(write_web_config(tmp_path / "web.yml", {"basic_auth_users": {"prometheus": HASH}}))
    security.count_failure("wrong_password")
    return exposition(WebCollector(), security.part())


def http(tmp_path: Path) -> str:
    """The listener's counts, as `serve` keeps them (every reason and kind from the start)."""
    server = HttpServer(WebOptions())
    server.table.count_timeout("write")
    return exposition(HttpCollector(), server.status())


def resources(tmp_path: Path) -> str:
    """This process through /proc, in a cgroup tree with a limit (a Kubernetes pod's)."""
    source = ResourcesSource(root=FIXTURES / "cgroup" / "v2-pod-limited__kubernetes")
    asyncio.run(source.refresh())
    return exposition(ResourcesCollector(), source.part())


def owners(tmp_path: Path) -> str:
    """`once` on the 910B3 process table, each pid in a real cgroup of another runtime (and
    this process's real stat): who holds each chip."""
    script = write_replay_npu_smi(tmp_path, {"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    layouts = (
        "v2-kubernetes-systemd-containerd__containerd-1.6.4__1",
        "v1-docker-systemd__unknown__1",
        "v2-podman-rootful__unknown__1",
        "v2-slurm__unknown__1",
        "v1-slurm__slurm-21__1",
        "v2-systemd-service__written",
        "v1-containerd-cgroupfs__written",
        "v1-host__unknown__1",
    )
    tree = procfs_tree(tmp_path / "proc", dict(zip(PIDS_910B3, layouts, strict=True)))
    flags = {"owners.procfs": str(tree), "owners.docker_socket": "", "owners.podman_socket": "", "owners.containerd_socket": ""}
    return node_exposition(**{"npu_smi.path": str(script), "npu_smi.details": "", "npu_smi.board": "false", **flags})


PRODUCERS = (
    npu_smi_910b3,
    npu_smi_310p,
    npu_smi_health,
    simulated,
    simulated_hardware,
    hccn_tool,
    hccn_tool_simulated,
    kubelet,
    ingest,
    profiles,
    web,
    http,
    resources,
    owners,
)


def test_every_declared_metric_is_produced_from_real_outputs(tmp_path: Path):
    produced: set[str] = set()
    lint = tool("promtool")
    for producer in PRODUCERS:
        directory = tmp_path / producer.__name__
        directory.mkdir()
        text = producer(directory)
        for family in text_string_to_metric_families(text):
            produced |= {sample.name for sample in family.samples}
        # Prometheus' linter on what was produced: conventional names and units, not one warning.
        proc = subprocess.run([lint, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False)
        assert (proc.returncode, proc.stdout + proc.stderr) == (0, ""), producer.__name__
    silent = [spec.name for spec in ALL_METRICS if not any(name == spec.name or name.startswith(spec.name + "_") for name in produced)]
    assert not silent, f"declared but produced by no real output: {silent}"
