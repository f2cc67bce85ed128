"""One node's exporter built from its settings and the source table (sources.py): sources,
sampler, publisher and registry.

Sources run on the sampler's schedule; after every run the sampler publishes a snapshot built
from each source's part, in the table's order, to the publisher (publisher.py), which encodes it
off the event loop and swaps the (snapshot, bodies) pair in; the live parts are read by the
publisher on their own cadence. The registry's one collector (exposition.py) renders the
current snapshot afresh (`once`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry

from exporter.core.about import About, CollectorState
from exporter.core.health import HealthRegistry
from exporter.core.sampler import Sampler, Task
from exporter.core.snapshot import Snapshot
from exporter.core.source import Live, Source
from exporter.node.exposition import Exposition, Rendering
from exporter.node.publisher import LIVE_INTERVAL, Publisher
from exporter.node.simulate import Simulated
from exporter.node.sources import SOURCES, Build, NodeSettings, Registration, collector_states, posted
from exporter.node.sources import ingest_store as ingest_of

if TYPE_CHECKING:
    from exporter.jobs.store import IngestStore
    from exporter.profiles.posted import PostedProfiles

log = logging.getLogger("exporter")

T = TypeVar("T")


@dataclass
class Node:
    publisher: Publisher  # the sampler's latest snapshot and the served (snapshot, bodies) pair
    registry: CollectorRegistry
    exposition: Exposition  # the registry's one collector, and the publisher's encoder
    sampler: Sampler
    sources: Mapping[str, Source]  # the sources on, by name, in the table's order
    simulated: Simulated | None = None
    ingest: IngestStore | None = None  # training-hook steps (POST /api/v1/steps); None when disabled
    posted: PostedProfiles | None = None  # the hooks' profile summaries (POST /api/v1/profiles); None without ingest or profiles
    health: HealthRegistry = field(default_factory=HealthRegistry)
    collectors: tuple[CollectorState, ...] = ()

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


def build_snapshot(ready: bool, sources: Mapping[str, Source]) -> Snapshot:
    """A snapshot of every sampled source's part as of now, in the table's order (each part
    reads the ones before it)."""
    snapshot = Snapshot(ready)
    for name, source in sources.items():
        if not isinstance(source, Live):
            snapshot = snapshot.replaced({name: source.part(snapshot)})
    return snapshot


def assemble(
    settings: NodeSettings,
    *,
    ingest: bool = True,
    single_scan: bool = False,
    more: Sequence[Registration] = (),
) -> Node:
    """``ingest=False`` leaves the hooks ingest out (`once` has no server); ``more``: sources
    registered after the table's (`serve`'s web server parts); ``single_scan`` (`once`) reports
    every finished profile export on the first scan."""
    health = HealthRegistry()
    exposition = Exposition(())
    publisher = Publisher(exposition, live_interval=LIVE_INTERVAL)
    build = Build(settings, health, lambda: publisher.sampled, ingest=ingest, single_scan=single_scan)
    sources: dict[str, Source] = {}
    renderings: list[Rendering] = []
    for registration in (*SOURCES, *more):
        source = registration.build(build)
        if source is None:
            continue
        sources[registration.name] = source
        renderings += [
            Rendering(collector(), registration.name)
            for switch, collector in registration.collectors
            if getattr(settings.collector, switch)
        ]
    exposition.renderings = tuple(renderings)
    publisher.live = {name: source.read for name, source in sources.items() if isinstance(source, Live)}
    tasks: list[Task] = [task for source in sources.values() for task in source.tasks()]

    def publish(ready: bool) -> None:
        publisher.publish(build_snapshot(ready, sources))

    registry = CollectorRegistry(auto_describe=True)
    registry.register(exposition)
    ingest_store, posted_profiles = ingest_of(build), posted(build)
    if ingest_store is not None:
        log.info(
            "training-hook ingest enabled",
            extra={"path": "/api/v1/steps", "token": settings.ingest.token is not None, "ttl": settings.ingest.ttl},
        )
    # Withheld data leaves /metrics at most a tenth of max_age late, even if every task stalls.
    sampler = Sampler(tasks, health, publish, republish_interval=min(10.0, max(1.0, settings.max_age / 10)))
    node = Node(
        publisher,
        registry,
        exposition,
        sampler,
        sources,
        build.simulated,
        ingest=ingest_store,
        posted=posted_profiles,
        health=health,
    )
    node.collectors = collector_states(build, sources)
    log.info("collectors enabled", extra={state.name: state.detail if state.on else "off" for state in node.collectors})
    return node
