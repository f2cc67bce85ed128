"""The exporter's process, Python runtime and cgroup memory limit from the resources part."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core.metric import family
from exporter.resources import metrics as m
from exporter.resources.part import ResourcesPart


class ResourcesCollector:
    specs = m.RESOURCE_METRICS

    def render(self, part: ResourcesPart) -> Iterator[Metric]:
        for spec in m.PROCESS_GAUGES:
            value = getattr(part, spec.field)
            if value is not None:
                metric = family(spec)
                metric.add_metric([], value)
                yield metric
        if part.python[0]:
            info = family(m.PYTHON_INFO)
            info.add_metric(list(part.python), 1)
            yield info
        for spec in m.GC_METRICS:
            metric = family(spec)
            for generation in part.gc:
                metric.add_metric([str(generation.generation)], getattr(generation, spec.fields[1]))
            yield metric
