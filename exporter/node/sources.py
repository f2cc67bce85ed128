"""Every source of the exporter, one line each: its snapshot key, how it is built from the
settings (None: off, by its `collector.*` switch or its own options), and the collectors that
render its part, each under its `collector.*` switch (as node_exporter has `--collector.NAME`).

The order of the table is the order of the exposition and of the parts' building (a part reads
the ones before it: pods and the exporter's status read the chips), and the sampler's first
task is the first source's (npu-smi: readiness waits on it). Adding a source is a package with
a ``tasks()``/``part()`` source, a part and a collector, and one line here. The web server's
own parts (its config's and its listener's counts) are registered after these by `serve`, which
puts the node and the web server together (app/sources.py): the node knows nothing of the web.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from exporter.core.about import CollectorState
from exporter.core.health import HealthRegistry
from exporter.core.metric import Collector
from exporter.core.runner import CommandRunner
from exporter.core.selfmetrics import SOURCE_NOTE, STATUS, StatusCollector, StatusPart
from exporter.core.snapshot import Snapshot
from exporter.core.source import Derived, Live, Sampled, Source
from exporter.hccn.collector import NetworkCollector
from exporter.hccn.options import HccnOptions
from exporter.hccn.part import NETWORK
from exporter.hccn.source import HccnSource
from exporter.jobs.collector import JobCollector
from exporter.jobs.mfu import PeakJoin, Peaks
from exporter.jobs.store import JOBS, IngestStore
from exporter.jobs.validate import IngestLimits
from exporter.node.collectors import npu_smi_needed
from exporter.node.simulate import Simulated, hccn_tool_command, npu_smi_command
from exporter.npusmi.collector import ChipsCollector, ProcessesCollector
from exporter.npusmi.metrics import ECC_NOTE, ENERGY_NOTE, FAULT_NOTE
from exporter.npusmi.part import DEVICES, DevicesPart
from exporter.npusmi.peak import table_note
from exporter.npusmi.source import NpuSmiSource
from exporter.pods.collector import PodCollector
from exporter.pods.part import PODS
from exporter.pods.source import PodResourcesSource, in_kubernetes
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.part import PROFILES, ProfilesPart
from exporter.profiles.posted import PostedLimits, PostedProfiles, merged
from exporter.profiles.source import ProfileSource
from exporter.resources.collector import ResourcesCollector
from exporter.resources.part import RESOURCES
from exporter.resources.source import ResourcesSource

if TYPE_CHECKING:
    from exporter.jobs.options import IngestOptions
    from exporter.node.collectors import CollectorOptions
    from exporter.node.simulate import SimulatorOptions
    from exporter.npusmi.options import NpuSmiOptions
    from exporter.pods.options import PodsOptions
    from exporter.profiles.options import ProfilesOptions

log = logging.getLogger("exporter")

T = TypeVar("T")

HCCN_MAX_OUTPUT_BYTES = 1 << 20  # hccn_tool answers are small; a few calls at once (the device serialises them)
HCCN_MAX_CONCURRENCY = 4


class NodeSettings(Protocol):
    """What the node reads of the settings (the settings class of every package's options is
    put together above the node, with the web's: app/settings.py)."""

    @property
    def max_age(self) -> float: ...
    @property
    def npu_smi(self) -> NpuSmiOptions: ...
    @property
    def simulator(self) -> SimulatorOptions: ...
    @property
    def ingest(self) -> IngestOptions: ...
    @property
    def profiles(self) -> ProfilesOptions: ...
    @property
    def podresources(self) -> PodsOptions: ...
    @property
    def hccn(self) -> HccnOptions: ...
    @property
    def collector(self) -> CollectorOptions: ...


@dataclass
class Build:
    """What the table's builders read: the settings, and what `serve` or `once` hands in."""

    settings: NodeSettings
    health: HealthRegistry
    latest: Callable[[], Snapshot]  # the latest published snapshot (hccn_tool asks about its chips)
    ingest: bool = True  # False: `once`, which has no server
    single_scan: bool = False  # `once`: report every finished profile export on the first scan; no hccs-bw
    simulated: Simulated | None = None  # set by the npu-smi builder
    built: dict[str, object] = field(default_factory=dict)  # shared objects: the ingest store, posted profiles


@dataclass(frozen=True)
class Registration:
    name: str
    build: Callable[[Build], Source | None]
    collectors: tuple[tuple[str, Callable[[], Collector[Any]]], ...]  # (collector.* switch, its collector)
    notes: tuple[str, ...] = ()  # what the metric reference says below its table, where a row cannot say enough


def npu_smi(b: Build) -> Source | None:
    command, b.simulated = npu_smi_command(b.settings.simulator, b.settings.npu_smi.path)
    options = b.settings.npu_smi
    if not b.settings.collector.devices:
        options = replace(options, details=(), board=False)  # both only fill chip series
    elif b.single_scan:  # `once`: hccs-bw blocks its sampling time per chip, one chip after another
        options = replace(options, details=tuple(kind for kind in options.details if kind != "hccs-bw"))
    runner = CommandRunner(
        timeout=options.timeout,
        max_concurrency=options.max_concurrency,
        max_output_bytes=options.max_output_bytes,
        nice=options.nice,
        reserve_urgent=True,  # the overview (utilization) never waits behind the per-chip queries
    )
    source = NpuSmiSource(options, runner, b.health, command=command, max_age=b.settings.max_age)
    if not npu_smi_needed(b.settings.collector):  # no task; its (empty) part still stands for the chips
        return Derived(DEVICES.name, lambda earlier: source.part(), None)
    return Sampled(DEVICES.name, source)


def status(b: Build) -> Source | None:
    def make(earlier: Snapshot) -> StatusPart:
        devices = earlier.get(DEVICES) or DevicesPart()
        return StatusPart(b.health.statuses(), b.simulated, devices.stale_chips)

    return Derived(STATUS.name, make)


def resources(b: Build) -> Source | None:
    return Sampled(RESOURCES.name, ResourcesSource()) if b.settings.collector.self else None


def ingest_store(b: Build) -> IngestStore | None:
    """The hooks' steps (POST /api/v1/steps): shared by the jobs part and posted profiles."""
    if "ingest" not in b.built:
        options = b.settings.ingest
        on = b.ingest and b.settings.collector.jobs and options.enabled
        b.built["ingest"] = (
            IngestStore(
                ttl=options.ttl, finished_ttl=options.finished_ttl, stalled_after=options.stalled_after, limits=IngestLimits.of(options)
            )
            if on
            else None
        )
    store = b.built["ingest"]
    return store if isinstance(store, IngestStore) else None


def posted(b: Build) -> PostedProfiles | None:
    """The hooks' profile summaries: with the ingest (its limits) and the profiles collector."""
    if "posted" not in b.built:
        options = b.settings.ingest
        on = ingest_store(b) is not None and b.settings.collector.profiles
        b.built["posted"] = (
            PostedProfiles(
                PostedLimits(
                    max_jobs=options.max_jobs,
                    max_ranks=options.max_ranks,
                    max_ranks_per_client=options.max_ranks_per_client,
                    top_k=b.settings.profiles.top_k,
                )
            )
            if on
            else None
        )
    summaries = b.built["posted"]
    if not isinstance(summaries, PostedProfiles):
        return None
    store = ingest_store(b)
    if store is not None:
        store.on_gone = summaries.forget  # a rank's summaries end with it (ingest.finished_ttl)
    return summaries


def profiles(b: Build) -> Source | None:
    """Watched exports and posted summaries as one part: per job and rank the one produced last."""
    watched = (
        ProfileSource(b.settings.profiles, b.health, single_scan=b.single_scan)
        if b.settings.collector.profiles and b.settings.profiles.dirs
        else None
    )
    pushed = posted(b)
    if watched is None and pushed is None:
        return None

    def make(earlier: Snapshot) -> ProfilesPart | None:
        if pushed is None:
            return watched.part() if watched else None
        return merged(watched.part() if watched else None, pushed.summaries())

    return Derived(PROFILES.name, make, watched)


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


def hccn(b: Build) -> Source | None:
    options = b.settings.hccn
    command = hccn_command(options, b.simulated) if b.settings.collector.network else None
    if command is None:
        return None
    runner = CommandRunner(
        timeout=options.timeout, max_concurrency=HCCN_MAX_CONCURRENCY, max_output_bytes=HCCN_MAX_OUTPUT_BYTES, nice=options.nice
    )

    def chips() -> Sequence[Any]:
        devices = b.latest().get(DEVICES)
        return devices.chips if devices is not None else ()

    return Sampled(NETWORK.name, HccnSource(options, runner, b.health, chips=chips, command=command, max_age=b.settings.max_age))


def pods(b: Build) -> Source | None:
    enabled = b.settings.podresources.enabled if b.settings.collector.pods else False
    if enabled is None:
        enabled = in_kubernetes()
    if not enabled:
        return None
    source = PodResourcesSource(b.settings.podresources, b.health)

    def make(earlier: Snapshot) -> object:
        devices = earlier.get(DEVICES)
        return source.part(devices.chips if devices is not None else ())

    return Derived(PODS.name, make, source)


def jobs(b: Build) -> Source | None:
    store = ingest_store(b)
    return Live(JOBS.name, PeakJoin(store.part, lambda: chip_peaks(b.latest())).read, store) if store is not None else None


def chip_peaks(snapshot: Snapshot) -> Peaks:
    """(device, precision, FLOP/s) of every chip read now: what the jobs' MFU divides by."""
    devices = snapshot.get(DEVICES)
    if devices is None:
        return ()
    return tuple(
        sorted(
            (str(c.device), precision, flops) for c in devices.chips if c.up and c.device is not None for precision, flops in c.peak_flops
        )
    )


SOURCES: tuple[Registration, ...] = (
    Registration(
        DEVICES.name,
        npu_smi,
        (("devices", ChipsCollector), ("processes", ProcessesCollector)),
        (ECC_NOTE, ENERGY_NOTE, FAULT_NOTE, table_note()),
    ),
    Registration(STATUS.name, status, (("self", StatusCollector),), (SOURCE_NOTE,)),
    Registration(RESOURCES.name, resources, (("self", ResourcesCollector),)),
    Registration(PROFILES.name, profiles, (("profiles", ProfileCollector),)),
    Registration(NETWORK.name, hccn, (("network", NetworkCollector),)),
    Registration(PODS.name, pods, (("pods", PodCollector),)),
    Registration(JOBS.name, jobs, (("jobs", JobCollector),)),
)


def collector_states(b: Build, sources: Mapping[str, Source]) -> tuple[CollectorState, ...]:
    """Each collector, on or off, with what runs for it or what switched it off."""
    settings, simulated = b.settings, b.simulated
    switches = settings.collector
    npu_smi = behind(sources, DEVICES.name, NpuSmiSource)
    hccn = behind(sources, NETWORK.name, HccnSource)
    pods = sources.get(PODS.name)
    profiles = behind(sources, PROFILES.name, ProfileSource)
    pushed = posted(b)
    jobs = sources.get(JOBS.name)

    def state(name: str, running: bool, detail: str, why_off: str) -> CollectorState:
        if not getattr(switches, name):
            return CollectorState(name, False, f"collector.{name} is off")
        return CollectorState(name, running, detail if running else why_off)

    simulator = f"the built-in simulator ({simulated[1]}, scenario {simulated[0]})" if simulated else ""
    npu_smi_text = "npu-smi: " + (simulator or (" ".join(npu_smi.command) if npu_smi else ""))
    hccn_text = "hccn_tool: " + (simulator or " ".join(hccn.command)) if hccn else ""
    return (
        state("devices", True, npu_smi_text, ""),
        state("processes", True, npu_smi_text, ""),
        state("network", hccn is not None, hccn_text, "hccn.enabled is false or hccn_tool is not installed"),
        state(
            "pods",
            pods is not None,
            f"kubelet pod-resources: {settings.podresources.socket}",
            "podresources.enabled is false or not in Kubernetes",
        ),
        state(
            "profiles",
            profiles is not None or pushed is not None,
            "; ".join(
                ([f"profile directories: {', '.join(settings.profiles.dirs)}"] if profiles else [])
                + (["POST /api/v1/profiles"] if pushed else [])
            ),
            "no profiles.dirs, and no ingest for the hooks' profiles",
        ),
        state("jobs", jobs is not None, "POST /api/v1/steps", "ingest.enabled is false, or `once`"),
        state("self", True, "the exporter's own metrics", ""),
    )


def behind(sources: Mapping[str, Source], name: str, kind: type[T]) -> T | None:
    """The source object of type ``kind`` behind source ``name``, or None."""
    found = getattr(sources.get(name), "source", None)
    return found if isinstance(found, kind) else None
