"""One node's exporter built from its settings and the source table (sources.py): sources,
sampler, publisher and registry.

The tools' commands are resolved first (npu-smi found or simulated, and the simulator's
hccn_tool), then each registration of the table builds its source from its own options; the
collectors of the switches that are on render the parts. Sources run on the sampler's schedule;
after every run the sampler publishes a snapshot built from each source's part, in the table's
order, to the publisher (publisher.py), which encodes it off the event loop and swaps the
(snapshot, bodies) pair in; the live parts are read by the publisher on their own cadence. The
registry's one collector (exposition.py) renders the current snapshot afresh (`once`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from exporter.core.about import About, CollectorState
from exporter.core.health import HealthRegistry
from exporter.core.registration import Context, Registration, Section, Shared, Simulated, Switches, Tool
from exporter.core.sampler import Sampler, Task
from exporter.core.snapshot import Snapshot
from exporter.core.source import Live, Source
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import LIVE_INTERVAL, Publisher
from exporter.node.simulate import SimulatorOptions, passwd_file, procfs_tree, resolve_commands, sysfs_tree
from exporter.node.sources import SOURCES
from exporter.npusmi.options import NPU_SMI_OPTIONS

log = logging.getLogger("exporter")

Opts = TypeVar("Opts")
T = TypeVar("T")


class NodeSettings(Protocol):
    """What the node reads of the settings (put together above the node, with the web's:
    app/settings.py): the node-wide options, the switches and each registered section."""

    @property
    def max_age(self) -> float: ...
    @property
    def simulator(self) -> SimulatorOptions: ...
    @property
    def collector(self) -> Switches: ...
    def __getitem__(self, section: Section[Opts], /) -> Opts: ...


@dataclass
class Built:
    """The table walked for one node: the sources on, by name in the table's order, what renders
    them, each collector's state and the tools the sources run."""

    context: Context
    sources: dict[str, Source]
    renderings: tuple[Rendering, ...]
    collectors: tuple[CollectorState, ...]
    tools: tuple[Tool, ...]


def build_sources(
    settings: NodeSettings,
    *,
    serving: bool = True,
    single_scan: bool = False,
    more: Sequence[Registration[Any]] = (),
    health: HealthRegistry | None = None,
    latest: Callable[[], Snapshot] = Snapshot,
    say: bool = True,
) -> Built:
    """Every registration of the table (then ``more``) built from ``settings``; ``say=False``
    logs nothing (check-config describes a node it does not serve)."""
    commands, simulated = resolve_commands(settings.simulator, settings[NPU_SMI_OPTIONS].path, say=say)
    context = Context(
        switches=settings.collector,
        health=health or HealthRegistry(),
        latest=latest,
        max_age=settings.max_age,
        sections=settings.__getitem__,
        commands=commands,
        simulated=simulated,
        simulate=settings.simulator.scenario,
        sysfs=None if simulated is None else sysfs_tree(simulated.model),
        procfs=None if simulated is None else procfs_tree(simulated.model),
        passwd=None if simulated is None else passwd_file(),
        serving=serving,
        single_scan=single_scan,
        table=(*SOURCES, *more),
    )
    sources: dict[str, Source] = {}
    renderings: list[Rendering] = []
    for registration in context.table:
        source = registration.build(context.build(registration))
        if source is None:
            continue
        sources[registration.name] = source
        renderings += [Rendering(c.make(), registration.name) for c in registration.collectors if context.switches.on(c.switch)]
    states = tuple(collector_state(context, sources, r, switch.name) for r in context.table for switch in r.switches)
    tools = tuple(tool for r in context.table for tool in r.tools(context.build(r)))
    return Built(context, sources, tuple(renderings), states, tools)


def collector_state(context: Context, sources: Mapping[str, Source], registration: Registration[Any], switch: str) -> CollectorState:
    """A switch on or off, with what runs for it or why it is off (its registration's words)."""
    if not context.switches.on(switch):
        return CollectorState(switch, False, f"collector.{switch} is off", switch=False)
    source = sources.get(registration.name)
    return CollectorState(switch, source is not None, registration.describe(context.build(registration), source))


@dataclass
class Node:
    publisher: Publisher  # the sampler's latest snapshot and the served (snapshot, bodies) pair
    registry: CollectorRegistry
    exposition: Exposition  # the registry's one collector, and the publisher's encoder
    sampler: Sampler
    sources: Mapping[str, Source]  # the sources on, by name, in the table's order
    context: Context
    collectors: tuple[CollectorState, ...] = ()
    health: HealthRegistry = field(default_factory=HealthRegistry)

    @property
    def simulated(self) -> Simulated | None:
        return self.context.simulated

    def about(self) -> About:
        """What the landing page shows: the collectors (fixed at start) and every source's health."""
        return About(self.collectors, self.health.statuses())

    def ready(self) -> bool:
        """The served pair's snapshot has the first sample (what /readyz answers)."""
        return self.publisher.served.snapshot.ready

    def source(self, kind: type[T]) -> T | None:
        """The source object of type ``kind`` behind a source that is on, or None."""
        for source in self.sources.values():
            behind = getattr(source, "source", None)
            if isinstance(behind, kind):
                return behind
        return None

    def shared(self, key: Shared[T]) -> T | None:
        """An object a registration made for others (the hooks' posted profiles)."""
        return self.context.shared(key)


def build_snapshot(ready: bool, sources: Mapping[str, Source]) -> Snapshot:
    """A snapshot of every sampled source's part as of now, in the table's order (each part
    reads the ones before it)."""
    snapshot = Snapshot(ready)
    for name, source in sources.items():
        if not isinstance(source, Live):
            snapshot = snapshot.replaced({name: source.produce(snapshot)})
    return snapshot


def assemble(
    settings: NodeSettings,
    *,
    ingest: bool = True,
    single_scan: bool = False,
    more: Sequence[Registration[Any]] = (),
) -> Node:
    """``ingest=False`` leaves the hooks ingest out (`once` has no server); ``more``: sources
    registered after the table's (`serve`'s web server parts); ``single_scan`` (`once`) reports
    every finished profile export on the first scan."""
    health = HealthRegistry()
    exposition = Exposition(())
    publisher = Publisher(exposition, live_interval=LIVE_INTERVAL)
    built = build_sources(settings, serving=ingest, single_scan=single_scan, more=more, health=health, latest=lambda: publisher.sampled)
    sources = built.sources
    exposition.renderings = built.renderings
    publisher.live = {name: source.read for name, source in sources.items() if isinstance(source, Live)}
    tasks: list[Task] = [task for source in sources.values() for task in source.tasks()]

    def publish(ready: bool) -> None:
        publisher.publish(build_snapshot(ready, sources))

    registry = CollectorRegistry(auto_describe=True)
    registry.register(exposition)
    # Withheld data leaves /metrics at most a tenth of max_age late, even if every task stalls.
    sampler = Sampler(tasks, health, publish, republish_interval=min(10.0, max(1.0, settings.max_age / 10)))
    node = Node(publisher, registry, exposition, sampler, sources, built.context, built.collectors, health)
    log.info("collectors enabled", extra={state.name: state.detail if state.on else "off" for state in node.collectors})
    return node
