"""One node's exporter built from Settings and the source table (sources.py): sources,
sampler, snapshot store and registry.

Sources run on the sampler's schedule; after every run the sampler publishes a snapshot built
from each source's part, in the table's order; the registry's one collector (exposition.py)
renders it. The live parts are read by the store between runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry

from exporter.core.health import HealthRegistry
from exporter.core.sampler import Sampler, Task
from exporter.core.snapshot import Snapshot
from exporter.core.source import Live, Source
from exporter.node.exposition import Exposition, Rendering
from exporter.node.settings import Settings
from exporter.node.simulate import Simulated
from exporter.node.snapshot import SnapshotStore
from exporter.node.sources import SOURCES, Build, collector_states, posted
from exporter.node.sources import ingest_store as ingest_of
from exporter.web.landing import About, CollectorState

if TYPE_CHECKING:  # serve's web config and listener; `once` and the in-process readers never load aiohttp's server
    from exporter.jobs.store import IngestStore
    from exporter.profiles.posted import PostedProfiles
    from exporter.web.collector import HttpStatus
    from exporter.web.security import WebSecurity

log = logging.getLogger("exporter")

# Training steps arrive continuously: their part is re-read (and re-encoded) after a pause in
# proportion to what reading it cost (snapshot.py), never longer than this.
LIVE_INTERVAL = 1.0

T = TypeVar("T")


@dataclass
class Node:
    store: SnapshotStore
    registry: CollectorRegistry
    exposition: Exposition  # the registry's one collector: what /metrics renders
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
    settings: Settings,
    *,
    ingest: bool = True,
    security: WebSecurity | None = None,
    http: Callable[[], HttpStatus] | None = None,
    single_scan: bool = False,
) -> Node:
    """``ingest=False`` leaves the hooks ingest out (`once` has no server); ``security`` (the
    web config of `serve`) and ``http`` (the counts of `serve`'s listener) add their metrics;
    ``single_scan`` (`once`) reports every finished profile export on the first scan."""
    health = HealthRegistry()
    store = SnapshotStore(live_interval=LIVE_INTERVAL)
    build = Build(settings, health, lambda: store.sampled, ingest=ingest, single_scan=single_scan, security=security, http=http)
    sources: dict[str, Source] = {}
    renderings: list[Rendering] = []
    for registration in SOURCES:
        source = registration.build(build)
        if source is None:
            continue
        sources[registration.name] = source
        renderings += [
            Rendering(collector(), registration.name)
            for switch, collector in registration.collectors
            if getattr(settings.collector, switch)
        ]
    store.live = {name: source.read for name, source in sources.items() if isinstance(source, Live)}
    tasks: list[Task] = [task for source in sources.values() for task in source.tasks()]

    def publish(ready: bool) -> None:
        store.publish(build_snapshot(ready, sources))

    async def publish_prepared(ready: bool) -> None:
        await store.publish_prepared(lambda: build_snapshot(ready, sources))

    exposition = Exposition(store, renderings)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(exposition)
    ingest_store, posted_profiles = ingest_of(build), posted(build)
    if ingest_store is not None:
        log.info(
            "training-hook ingest enabled",
            extra={"path": "/api/v1/steps", "token": settings.ingest.token is not None, "ttl": settings.ingest.ttl},
        )
    node = Node(
        store,
        registry,
        exposition,
        Sampler([], health, publish),
        sources,
        build.simulated,
        ingest=ingest_store,
        posted=posted_profiles,
        health=health,
    )
    node.collectors = collector_states(build, sources)
    log.info("collectors enabled", extra={state.name: state.detail if state.on else "off" for state in node.collectors})
    # Withheld data leaves /metrics at most a tenth of max_age late, even if every task stalls.
    node.sampler = Sampler(tasks, health, publish, republish_interval=min(10.0, max(1.0, settings.max_age / 10)), prepared=publish_prepared)
    return node
