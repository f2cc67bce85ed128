"""Builds the running exporter from Settings: runner, sources, sampler, registry."""

from __future__ import annotations

import logging
import shutil
import sys
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from exporter.collectors.devices import DeviceCollector
from exporter.collectors.jobs import JobCollector
from exporter.collectors.self import SelfCollector
from exporter.config import Settings
from exporter.ingest import IngestLimits, IngestStore
from exporter.sampler import Sampler, SnapshotStore, Task
from exporter.sources.health import HealthRegistry
from exporter.sources.npusmi import NpuSmiSettings, NpuSmiSource
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
        return simulator_command(scenario, settings.simulator_model), (scenario, settings.simulator_model)
    return (settings.npu_smi_path,), None


def build_ingest(settings: Settings) -> IngestStore:
    limits = IngestLimits(
        max_jobs=settings.ingest_max_jobs,
        max_ranks=settings.ingest_max_ranks,
        max_body_bytes=settings.ingest_max_body_bytes,
    )
    return IngestStore(ttl=settings.ingest_ttl, finished_ttl=settings.ingest_finished_ttl, limits=limits)


def assemble(settings: Settings, *, ingest: bool = True) -> Exporter:
    """``ingest=False`` leaves the hooks ingest out (the `once` command has no server)."""
    command, simulated = resolve_npu_smi(settings)
    health = HealthRegistry()
    runner = CommandRunner(
        timeout=settings.npu_smi_timeout,
        max_concurrency=settings.npu_smi_max_concurrency,
        max_output_bytes=settings.npu_smi_max_output_bytes,
    )
    npu_smi = NpuSmiSource(
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
    store = SnapshotStore()
    tasks = [Task(name, interval, run) for name, interval, run in npu_smi.tasks()]
    sampler = Sampler(tasks, npu_smi.part, health, store, simulated=simulated)

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
    ingest_store = build_ingest(settings) if ingest and settings.ingest_enabled else None
    if ingest_store is not None:
        registry.register(JobCollector(ingest_store))
        log.info(
            "training-hook ingest enabled",
            extra={"path": "/api/v1/steps", "token": settings.ingest_token is not None, "ttl": settings.ingest_ttl},
        )
    log.info(
        "collectors enabled",
        extra={"collectors": ",".join(sorted(settings.collectors)), "npu_smi": " ".join(command)},
    )
    return Exporter(store, registry, sampler, npu_smi, ingest=ingest_store, ingest_token=settings.ingest_token)
