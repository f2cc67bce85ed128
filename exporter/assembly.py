"""Builds the running exporter from Settings: runner, sources, sampler, registry."""

from __future__ import annotations

import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from exporter.collectors.devices import DeviceCollector
from exporter.collectors.jobs import JobCollector
from exporter.collectors.network import NetworkCollector
from exporter.collectors.pods import PodCollector
from exporter.collectors.profiles import ProfileCollector
from exporter.collectors.self import SelfCollector
from exporter.config import NETWORK_SCENARIOS, Settings
from exporter.ingest import IngestLimits, IngestStore
from exporter.sampler import Sampler, SnapshotStore, Task
from exporter.sources.hccn import HccnSettings, HccnSource
from exporter.sources.health import HealthRegistry
from exporter.sources.npusmi import NpuSmiSettings, NpuSmiSource
from exporter.sources.podresources import PodResourcesSettings, PodResourcesSource, in_kubernetes
from exporter.sources.profiles import ProfileSource, ProfileSourceSettings
from exporter.sources.runner import CommandRunner

log = logging.getLogger("exporter")


@dataclass
class Exporter:
    store: SnapshotStore
    registry: CollectorRegistry
    sampler: Sampler
    npu_smi: NpuSmiSource
    ingest: IngestStore | None = None     # training-hook steps (POST /api/v1/steps); None when disabled
    ingest_token: str | None = None
    hccn: HccnSource | None = None        # hccn_tool network source; None when off or not installed


def simulator_command(scenario: str, model: str) -> tuple[str, ...]:
    """argv prefix that makes the simulator answer like npu-smi, through the same subprocess path."""
    return (sys.executable, "-m", "exporter.simulator", "--model", model, "--scenario", scenario, "--")


def resolve_npu_smi(settings: Settings) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """The npu-smi argv prefix and, when simulating, (scenario, model)."""
    scenario = settings.simulator_scenario
    if scenario == "auto":
        found = shutil.which(settings.npu_smi_path)
        if found:
            return (found,), None
        log.warning(
            "npu-smi not found; serving the built-in simulator (scenario healthy)",
            extra={"npu_smi": settings.npu_smi_path, "model": settings.simulator_model},
        )
        scenario = "healthy"
    if scenario:
        chip_scenario = "healthy" if scenario in NETWORK_SCENARIOS else scenario
        return simulator_command(chip_scenario, settings.simulator_model), (scenario, settings.simulator_model)
    return (settings.npu_smi_path,), None


def hccn_simulator_command(scenario: str, model: str) -> tuple[str, ...]:
    """argv prefix that makes the simulator answer like hccn_tool (same subprocess path)."""
    return (sys.executable, "-m", "exporter.simulator.hccn", "--model", model, "--scenario", scenario, "--")


def resolve_hccn(settings: Settings, simulated: tuple[str, str] | None) -> tuple[str, ...] | None:
    """The hccn_tool argv prefix, or None when the network source is off.

    auto: on when the binary exists (inference-only nodes have none: no network metrics,
    nothing counted); with the simulator, the simulator's hccn_tool.
    """
    if settings.hccn_enabled is False:
        return None
    if simulated is not None:
        return hccn_simulator_command(*simulated)
    if settings.hccn_enabled is None and not shutil.which(settings.hccn_path):
        log.info("hccn_tool not found; network metrics off", extra={"hccn_tool": settings.hccn_path})
        return None
    return (settings.hccn_path,)


def build_hccn(
    settings: Settings, health: HealthRegistry, store: SnapshotStore, simulated: tuple[str, str] | None
) -> HccnSource | None:
    command = resolve_hccn(settings, simulated)
    if command is None:
        return None
    # EXP caps hccn_tool output at 1 MiB; a few calls at once (the device serialises them).
    runner = CommandRunner(timeout=settings.hccn_timeout, max_concurrency=4, max_output_bytes=1 << 20)
    return HccnSource(
        HccnSettings(
            command=command,
            timeout=settings.hccn_timeout,
            interval=settings.hccn_interval,
            slow_interval=settings.hccn_slow_interval,
            max_age=settings.max_age,
        ),
        runner,
        health,
        chips=lambda: store.current.devices.chips,
    )


def build_ingest(settings: Settings) -> IngestStore:
    limits = IngestLimits(
        max_jobs=settings.ingest_max_jobs,
        max_ranks=settings.ingest_max_ranks,
        max_body_bytes=settings.ingest_max_body_bytes,
    )
    return IngestStore(ttl=settings.ingest_ttl, finished_ttl=settings.ingest_finished_ttl, limits=limits)


def build_npu_smi(settings: Settings, health: HealthRegistry) -> tuple[NpuSmiSource, tuple[str, str] | None]:
    command, simulated = resolve_npu_smi(settings)
    runner = CommandRunner(
        timeout=settings.npu_smi_timeout,
        max_concurrency=settings.npu_smi_max_concurrency,
        max_output_bytes=settings.npu_smi_max_output_bytes,
    )
    source = NpuSmiSource(
        NpuSmiSettings(
            command=command,
            timeout=settings.npu_smi_timeout,
            interval=settings.npu_smi_interval,
            detail_interval=settings.npu_smi_detail_interval,
            inventory_interval=settings.npu_smi_inventory_interval,
            details=settings.npu_smi_details if "devices" in settings.collectors else (),
            board=settings.npu_smi_board,
            max_age=settings.max_age,
        ),
        runner,
        health,
    )
    return source, simulated


def build_profiles(settings: Settings, health: HealthRegistry) -> ProfileSource | None:
    if not settings.profiles_dirs:
        return None
    return ProfileSource(
        ProfileSourceSettings(
            directories=tuple(Path(d) for d in settings.profiles_dirs),
            state_file=Path(settings.profiles_state_file) if settings.profiles_state_file else None,
            interval=settings.profiles_interval,
            settle_seconds=settings.profiles_settle,
            top_k=settings.profiles_top_k,
        ),
        health,
    )


def build_pods(settings: Settings, health: HealthRegistry) -> PodResourcesSource | None:
    enabled = settings.podresources_enabled
    if enabled is None:
        enabled = in_kubernetes()
    if not enabled:
        return None
    return PodResourcesSource(
        PodResourcesSettings(
            socket=settings.podresources_socket,
            timeout=settings.podresources_timeout,
            interval=settings.podresources_interval,
            ttl=settings.podresources_ttl,
            resources=settings.podresources_resources,
        ),
        health,
    )


def assemble(settings: Settings, *, ingest: bool = True) -> Exporter:
    """``ingest=False`` leaves the hooks ingest out (the `once` command has no server)."""
    health = HealthRegistry()
    npu_smi, simulated = build_npu_smi(settings, health)
    profiles = build_profiles(settings, health)
    pods = build_pods(settings, health)
    store = SnapshotStore()

    # npu-smi first: readiness waits on the first task only.
    tasks = [Task(*task) for task in npu_smi.tasks()]
    if profiles:
        tasks.append(Task(*profiles.task()))
    if pods:
        tasks += [Task(*task) for task in pods.tasks()]
    # hccn after npu-smi: it asks about the chips the devices snapshot lists.
    hccn = build_hccn(settings, health, store, simulated)
    if hccn:
        tasks += [Task(*task) for task in hccn.tasks()]
    sampler = Sampler(
        tasks, npu_smi.part, health, store, simulated=simulated,
        profiles=profiles.summaries if profiles else tuple,
        network=hccn.part if hccn else tuple,
    )

    registry = CollectorRegistry(auto_describe=True)
    if settings.collectors & {"devices", "processes"}:
        registry.register(
            DeviceCollector(
                store,
                settings.max_age,
                chips="devices" in settings.collectors,
                processes="processes" in settings.collectors,
            )
        )
    if "self" in settings.collectors:
        registry.register(SelfCollector(store, settings.max_age))
    if profiles:
        registry.register(ProfileCollector(lambda: store.current.profiles))
    if hccn:
        registry.register(NetworkCollector(lambda: store.current.network, hccn.settings.port_age_limit))
    if pods:
        registry.register(PodCollector(pods, lambda: store.current.devices.chips, match_on=settings.podresources_device_id))
    ingest_store = build_ingest(settings) if ingest and settings.ingest_enabled else None
    if ingest_store is not None:
        registry.register(JobCollector(ingest_store))
        log.info(
            "training-hook ingest enabled",
            extra={"path": "/api/v1/steps", "token": settings.ingest_token is not None, "ttl": settings.ingest_ttl},
        )
    log.info(
        "collectors enabled",
        extra={
            "collectors": ",".join(sorted(settings.collectors)),
            "npu_smi": " ".join(npu_smi.settings.command),
            "profiles": ",".join(settings.profiles_dirs) or "off",
            "podresources": settings.podresources_socket if pods else "off",
            "hccn": " ".join(hccn.settings.command) if hccn else "off",
        },
    )
    return Exporter(store, registry, sampler, npu_smi, ingest=ingest_store, ingest_token=settings.ingest_token, hccn=hccn)
