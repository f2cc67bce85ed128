"""npu_chip_owner_info (who holds each chip) and the owner source's own counts."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core.metric import chip_labels, family
from exporter.owners import metrics as m
from exporter.owners.part import OwnersPart


class OwnerCollector:
    specs = m.OWNER_METRICS

    def render(self, part: OwnersPart) -> Iterator[Metric]:
        info = family(m.OWNER_INFO)
        for item in part.chips:
            info.add_metric(chip_labels(item) + [getattr(item, label) for label in m.OWNER_LABELS], 1)
        yield info
        skipped = family(m.PIDS_SKIPPED)
        for reason, count in part.skipped:
            skipped.add_metric([reason], count)
        yield skipped
        failures = family(m.NAME_LOOKUP_FAILURES)
        for runtime, reason, count in part.lookup_failures:
            failures.add_metric([runtime, reason], count)
        yield failures
