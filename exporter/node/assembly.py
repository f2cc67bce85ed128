"""One node's exporter built from Settings: sources, sampler, snapshot store and registry.

Sources run on the sampler's schedule; after every run the sampler publishes a snapshot built
from each source's part; the registry's one collector (exposition.py) renders it. The order
of the tasks matters: npu-smi first (readiness waits on it, and hccn_tool asks about the
chips it lists).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.core.sampler import Sampler, Task
from exporter.core.selfmetrics import StatusCollector, StatusPart
from exporter.hccn.collector import NetworkCollector
from exporter.hccn.options import HccnOptions
from exporter.hccn.source import HccnSource
from exporter.jobs.collector import JobCollector
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestLimits
from exporter.node.collectors import npu_smi_needed
from exporter.node.exposition import Exposition, Rendering
from exporter.node.settings import Settings
from exporter.node.simulate import Simulated, hccn_tool_command, npu_smi_command
from exporter.node.snapshot import Snapshot, SnapshotStore
from exporter.npusmi.collector import ChipsCollector, ProcessesCollector
from exporter.npusmi.source import NpuSmiSource
from exporter.pods.collector import PodCollector
from exporter.pods.source import PodResourcesSource, in_kubernetes
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.part import ProfilesPart
from exporter.profiles.posted import PostedLimits, PostedProfiles, merged
from exporter.profiles.source import ProfileSource
from exporter.resources.collector import ResourcesCollector
from exporter.resources.source import ResourcesSource
from exporter.web.collector import HttpCollector, HttpStatus, WebCollector
from exporter.web.landing import About, CollectorState

if TYPE_CHECKING:  # serve's web config; `once` and the in-process readers never load aiohttp's server
    from exporter.web.security import WebSecurity

log = logging.getLogger("exporter")

HCCN_MAX_OUTPUT_BYTES = 1 << 20   # hccn_tool answers are small; a few calls at once (the device serialises them)
HCCN_MAX_CONCURRENCY = 4
# Training steps arrive continuously: their part is re-read (and re-encoded) after a pause in
# proportion to what reading it cost (snapshot.py), never longer than this.
LIVE_INTERVAL = 1.0


@dataclass
class Node:
    store: SnapshotStore
    registry: CollectorRegistry
    exposition: Exposition                  # the registry's one collector: what /metrics renders
    sampler: Sampler
    npu_smi: NpuSmiSource
    simulated: Simulated | None = None
    hccn: HccnSource | None = None          # hccn_tool network source; None when off or not installed
    pods: PodResourcesSource | None = None  # kubelet pod attribution; None outside Kubernetes or off
    profiles: ProfileSource | None = None   # profiler exports; None without profiles.dirs
    ingest: IngestStore | None = None       # training-hook steps (POST /api/v1/steps); None when disabled
    posted: PostedProfiles | None = None    # the hooks' profile summaries (POST /api/v1/profiles); None without ingest or profiles
    health: HealthRegistry = field(default_factory=HealthRegistry)
    collectors: tuple[CollectorState, ...] = ()

    def about(self) -> About:
        """What the landing page shows: the collectors (fixed at start) and every source's health."""
        return About(self.collectors, self.health.statuses())


def build_npu_smi(settings: Settings, health: HealthRegistry) -> tuple[NpuSmiSource, Simulated | None]:
    command, simulated = npu_smi_command(settings.simulator, settings.npu_smi.path, settings.npu_smi.nice)
    options = settings.npu_smi
    if not settings.collector.devices:
        options = replace(options, details=(), board=False)   # both only fill chip series
    runner = CommandRunner(timeout=options.timeout, max_concurrency=options.max_concurrency, max_output_bytes=options.max_output_bytes,
                           nice=options.nice)
    return NpuSmiSource(options, runner, health, command=command, max_age=settings.max_age), simulated


def hccn_command(options: HccnOptions, simulated: Simulated | None) -> tuple[str, ...] | None:
    """The hccn_tool argv prefix, or None when the network source is off. auto: on when the
    binary exists (inference-only nodes have none: no network metrics, nothing counted); with
    the simulator, its hccn_tool."""
    if options.enabled is False:
        return None
    if simulated is not None:
        return hccn_tool_command(simulated)
    if options.enabled is None and not shutil.which(options.path):
        log.info("hccn_tool not found; network metrics off", extra={"hccn_tool": options.path})
        return None
    return (options.path,)


def build_hccn(settings: Settings, health: HealthRegistry, store: SnapshotStore, simulated: Simulated | None) -> HccnSource | None:
    options = settings.hccn
    command = hccn_command(options, simulated) if settings.collector.network else None
    if command is None:
        return None
    runner = CommandRunner(timeout=options.timeout, max_concurrency=HCCN_MAX_CONCURRENCY, max_output_bytes=HCCN_MAX_OUTPUT_BYTES,
                           nice=options.nice)
    return HccnSource(options, runner, health, chips=lambda: store.sampled.devices.chips, command=command, max_age=settings.max_age)


def build_pods(settings: Settings, health: HealthRegistry) -> PodResourcesSource | None:
    enabled = settings.podresources.enabled if settings.collector.pods else False
    if enabled is None:
        enabled = in_kubernetes()
    return PodResourcesSource(settings.podresources, health) if enabled else None


def build_ingest(settings: Settings) -> IngestStore:
    options = settings.ingest
    return IngestStore(ttl=options.ttl, finished_ttl=options.finished_ttl, limits=IngestLimits.of(options))


def build_posted(settings: Settings, ingest: IngestStore | None) -> PostedProfiles | None:
    """The hooks' profile summaries: with the ingest (its limits) and the profiles collector."""
    if ingest is None or not settings.collector.profiles:
        return None
    options = settings.ingest
    return PostedProfiles(PostedLimits(max_jobs=options.max_jobs, max_ranks=options.max_ranks,
                                       max_ranks_per_client=options.max_ranks_per_client, top_k=settings.profiles.top_k))


def profiles_part(profiles: ProfileSource | None, posted: PostedProfiles | None) -> ProfilesPart | None:
    """Watched exports and posted summaries as one part: per job and rank the one produced last."""
    if posted is None:
        return profiles.part() if profiles else None
    return merged(profiles.part() if profiles else None, posted.summaries())


def build_snapshot(
    ready: bool, health: HealthRegistry, npu_smi: NpuSmiSource, simulated: Simulated | None = None, *,
    hccn: HccnSource | None = None, pods: PodResourcesSource | None = None, profiles: ProfileSource | None = None,
    resources: ResourcesSource | None = None, posted: PostedProfiles | None = None,
) -> Snapshot:
    """A snapshot of every sampled source's part as of now (a part is None when its source is off)."""
    devices = npu_smi.part()
    return Snapshot(
        ready=ready,
        status=StatusPart(health.statuses(), simulated, devices.stale_chips),
        devices=devices,
        network=hccn.part() if hccn else None,
        pods=pods.part(devices.chips) if pods else None,
        profiles=profiles_part(profiles, posted),
        resources=resources.part() if resources else None,
    )


def assemble(settings: Settings, *, ingest: bool = True, security: WebSecurity | None = None,
             http: Callable[[], HttpStatus] | None = None, single_scan: bool = False) -> Node:
    """``ingest=False`` leaves the hooks ingest out (`once` has no server); ``security`` (the
    web config of `serve`) and ``http`` (the counts of `serve`'s listener) add their metrics;
    ``single_scan`` (`once`) reports every finished profile export on the first scan."""
    collectors = settings.collector
    health = HealthRegistry()
    npu_smi, simulated = build_npu_smi(settings, health)
    profiles = (ProfileSource(settings.profiles, health, single_scan=single_scan)
                if collectors.profiles and settings.profiles.dirs else None)
    pods = build_pods(settings, health)
    ingest_store = build_ingest(settings) if ingest and collectors.jobs and settings.ingest.enabled else None
    posted = build_posted(settings, ingest_store)
    web = security if collectors.self else None   # its metrics only; serve enforces it either way
    http = http if collectors.self else None       # likewise the listener's counts (serve's HttpServer.status)
    store = SnapshotStore(
        jobs=ingest_store.part if ingest_store else None,
        web=web.part if web else None,
        http=http,
        live_interval=LIVE_INTERVAL,
    )
    hccn = build_hccn(settings, health, store, simulated)
    resources = ResourcesSource() if collectors.self else None

    tasks: list[Task] = list(npu_smi.tasks()) if npu_smi_needed(collectors) else []
    for source in (profiles, pods, hccn, resources):
        if source is not None:
            tasks += source.tasks()

    def snapshot(ready: bool) -> Snapshot:
        return build_snapshot(ready, health, npu_smi, simulated, hccn=hccn, pods=pods, profiles=profiles,
                              resources=resources, posted=posted)

    def publish(ready: bool) -> None:
        store.publish(snapshot(ready))

    async def publish_prepared(ready: bool) -> None:
        await store.publish_prepared(lambda: snapshot(ready))

    # Order of the exposition: chips, processes, the exporter itself, then the optional sources.
    wanted = [
        (collectors.devices, ChipsCollector(), lambda s: s.devices),
        (collectors.processes, ProcessesCollector(), lambda s: s.devices),
        (collectors.self, StatusCollector(), lambda s: s.status),
        (resources is not None, ResourcesCollector(), lambda s: s.resources),
        (profiles is not None or posted is not None, ProfileCollector(), lambda s: s.profiles),
        (hccn is not None, NetworkCollector(), lambda s: s.network),
        (pods is not None, PodCollector(), lambda s: s.pods),
        (ingest_store is not None, JobCollector(), lambda s: s.jobs),
        (web is not None, WebCollector(), lambda s: s.web),
        (http is not None, HttpCollector(), lambda s: s.http),
    ]
    exposition = Exposition(store, [Rendering(collector, part) for on, collector, part in wanted if on])
    registry = CollectorRegistry(auto_describe=True)
    registry.register(exposition)
    if ingest_store is not None:
        log.info("training-hook ingest enabled",
                 extra={"path": "/api/v1/steps", "token": settings.ingest.token is not None, "ttl": settings.ingest.ttl})
    states = collector_states(settings, npu_smi, simulated, hccn=hccn, pods=pods, profiles=profiles, jobs=ingest_store,
                              posted=posted)
    log.info("collectors enabled", extra={state.name: state.detail if state.on else "off" for state in states})
    # Withheld data leaves /metrics at most a tenth of max_age late, even if every task stalls.
    sampler = Sampler(tasks, health, publish, republish_interval=min(10.0, max(1.0, settings.max_age / 10)),
                      prepared=publish_prepared)
    return Node(store, registry, exposition, sampler, npu_smi, simulated, hccn=hccn, pods=pods, profiles=profiles,
                ingest=ingest_store, posted=posted, health=health, collectors=states)


def collector_states(
    settings: Settings, npu_smi: NpuSmiSource, simulated: Simulated | None, *, hccn: HccnSource | None, pods: PodResourcesSource | None,
    profiles: ProfileSource | None, jobs: IngestStore | None, posted: PostedProfiles | None = None,
) -> tuple[CollectorState, ...]:
    """Each collector, on or off, with what runs for it or what switched it off."""
    switches = settings.collector

    def state(name: str, running: bool, detail: str, why_off: str) -> CollectorState:
        if not getattr(switches, name):
            return CollectorState(name, False, f"collector.{name} is off")
        return CollectorState(name, running, detail if running else why_off)

    simulator = f"the built-in simulator ({simulated[1]}, scenario {simulated[0]})" if simulated else ""
    npu_smi_text = "npu-smi: " + (simulator or " ".join(npu_smi.command))
    hccn_text = "hccn_tool: " + (simulator or " ".join(hccn.command)) if hccn else ""
    return (
        state("devices", True, npu_smi_text, ""),
        state("processes", True, npu_smi_text, ""),
        state("network", hccn is not None, hccn_text,
              "hccn.enabled is false or hccn_tool is not installed"),
        state("pods", pods is not None, f"kubelet pod-resources: {settings.podresources.socket}",
              "podresources.enabled is false or not in Kubernetes"),
        state("profiles", profiles is not None or posted is not None,
              "; ".join(([f"profile directories: {', '.join(settings.profiles.dirs)}"] if profiles else [])
                        + (["POST /api/v1/profiles"] if posted else [])),
              "no profiles.dirs, and no ingest for the hooks' profiles"),
        state("jobs", jobs is not None, "POST /api/v1/steps", "ingest.enabled is false, or `once`"),
        state("self", True, "the exporter's own metrics", ""),
    )
