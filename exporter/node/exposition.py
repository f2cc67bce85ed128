"""The one prometheus_client collector of the registry: every enabled collector renders its
part of one snapshot, in a fixed order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import Metric

from exporter.core.metric import Collector, family
from exporter.node.snapshot import Snapshot, SnapshotStore


@dataclass(frozen=True)
class Rendering:
    collector: Collector[Any]
    part: Callable[[Snapshot], Any]     # the collector's part of a snapshot; None: nothing to render


class Exposition:
    def __init__(self, store: SnapshotStore, renderings: Sequence[Rendering]) -> None:
        self.store = store
        self.renderings = tuple(renderings)

    def describe(self) -> Iterator[Metric]:
        for rendering in self.renderings:
            for spec in rendering.collector.specs:
                yield family(spec)

    def collect(self) -> Iterator[Metric]:
        snapshot = self.store.current    # one snapshot for the whole scrape
        for rendering in self.renderings:
            part = rendering.part(snapshot)
            if part is not None:
                yield from rendering.collector.render(part)
