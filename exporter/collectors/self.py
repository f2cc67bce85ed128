"""The exporter's own metrics: build, per-source health, simulator flag, staleness."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter import __version__
from exporter import metrics as m
from exporter.collectors import family
from exporter.sampler import SnapshotStore


class SelfCollector:
    def __init__(self, store: SnapshotStore, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.max_age = max_age
        self.clock = clock

    def describe(self) -> Iterator[Metric]:
        for spec in m.SELF_METRICS:
            yield family(spec)

    def collect(self) -> Iterator[Metric]:
        snap = self.store.current
        build = family(m.BUILD_INFO)
        build.add_metric([__version__, platform.python_version()], 1)
        yield build
        if snap.simulated is not None:
            simulated = family(m.SIMULATED)
            simulated.add_metric(list(snap.simulated), 1)
            yield simulated

        success, duration, errors = family(m.SOURCE_SUCCESS), family(m.SOURCE_DURATION), family(m.SOURCE_ERRORS)
        last, runs = family(m.SOURCE_LAST_SUCCESS), family(m.SOURCE_RUNS)
        for source in snap.sources:
            success.add_metric([source.name], 1 if source.success else 0)
            runs.add_metric([source.name], source.runs)
            if source.duration_seconds is not None:
                duration.add_metric([source.name], source.duration_seconds)
            if source.last_success_timestamp is not None:
                last.add_metric([source.name], source.last_success_timestamp)
            for reason, count in sorted(source.errors.items()):
                errors.add_metric([source.name, reason], count)
        yield from (success, duration, errors, last, runs)

        now = self.clock()
        stale = family(m.STALE_DROPPED)
        stale.add_metric([], sum(1 for c in snap.devices.chips if c.up and now - c.observed_at > self.max_age))
        yield stale
