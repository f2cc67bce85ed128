"""npu_pod_info (which pod holds each chip) and the kubelet devices left unattributed."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core.metric import chip_labels, family
from exporter.pods import metrics as m
from exporter.pods.part import PodsPart


class PodCollector:
    specs = m.POD_METRICS

    def render(self, part: PodsPart) -> Iterator[Metric]:
        info = family(m.POD_INFO)
        for item in part.chips:
            info.add_metric(chip_labels(item) + [item.namespace, item.pod, item.container], 1)
        yield info
        unmatched = family(m.PODRESOURCES_UNMATCHED)
        for reason, count in part.unmatched:
            unmatched.add_metric([reason], count)
        yield unmatched
