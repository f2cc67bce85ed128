"""The toy part as one gauge."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core.metric import field_families
from exporter.toy.metrics import TOY_METRICS
from exporter.toy.part import ToyPart


class ToyCollector:
    specs = TOY_METRICS

    def render(self, part: ToyPart) -> Iterator[Metric]:
        return field_families(TOY_METRICS, [part], lambda _: [])
