"""npu_pod_info: which pod holds each chip, from the kubelet pod-resources source.

Renders from plain data only: the attributions the source holds (in memory, within their
TTL) and the chips of the current devices snapshot. A chip no attribution names gets no
series; an attribution that names no chip is counted in
``cann_exporter_podresources_unmatched_devices{reason="no_chip"}`` and logged once.

Matching: the Ascend device plugin numbers devices by the chip's physical id
(exporter/sources/podresources.py). With ``match_on="physical"`` (the default) a device
matches the chip whose ``phy_id`` it equals, or, where npu-smi reports no physical id
(everything but A3), the chip whose logic id (``device`` label) it equals. ``"logic"``
matches logic ids only, for device plugins that number devices by logic id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol, Union

from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.collectors import chip_labels, family
from exporter.snapshot import ChipSample
from exporter.sources.podresources import SKIP_REASONS, PodAttribution

log = logging.getLogger("exporter.collectors.pods")

MATCH_ON = ("physical", "logic")
UNMATCHED_NO_CHIP = "no_chip"



class AttributionSource(Protocol):
    def attributions(self) -> tuple[PodAttribution, ...]: ...


Attributions = Union[AttributionSource, Callable[[], Iterable[PodAttribution]]]


class PodCollector:
    def __init__(
        self,
        source: Attributions,
        chips: Callable[[], Iterable[ChipSample]],
        match_on: str = "physical",
        skipped: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        if match_on not in MATCH_ON:
            raise ValueError(f"match_on must be one of {', '.join(MATCH_ON)}, got {match_on!r}")
        if hasattr(source, "attributions"):
            self._attributions = source.attributions
            skipped = skipped or getattr(source, "skipped", None)
        else:
            self._attributions = source
        self._skipped = skipped
        self._chips = chips
        self.match_on = match_on
        self._logged: set[tuple[str, str]] = set()

    def describe(self) -> Iterator[Metric]:
        for spec in m.POD_METRICS:
            yield family(spec)

    def chip_key(self, chip: ChipSample) -> int | None:
        if self.match_on == "physical" and chip.phy_id is not None:
            return chip.phy_id
        return chip.device

    def collect(self) -> Iterator[Metric]:
        chips = tuple(self._chips())
        by_id: dict[int, list[ChipSample]] = {}
        for chip in chips:
            key = self.chip_key(chip)
            if key is not None:
                by_id.setdefault(key, []).append(chip)

        info = family(m.POD_INFO)
        seen: set[tuple[str, ...]] = set()
        unmatched = 0
        for att in self._attributions():
            matches = by_id.get(att.device)
            if not matches:
                unmatched += 1
                self._log_unmatched(att, bool(chips))
                continue
            for chip in matches:
                labels = (*chip_labels(chip), att.namespace, att.pod, att.container)
                if labels not in seen:
                    seen.add(labels)
                    info.add_metric(list(labels), 1)
        yield info

        counts = {reason: 0 for reason in (UNMATCHED_NO_CHIP, *SKIP_REASONS)}
        counts[UNMATCHED_NO_CHIP] = unmatched
        if self._skipped is not None:
            for reason, count in self._skipped().items():
                counts[reason] = counts.get(reason, 0) + count
        gauge = family(m.PODRESOURCES_UNMATCHED)
        for reason, count in sorted(counts.items()):
            gauge.add_metric([reason], count)
        yield gauge

    def _log_unmatched(self, att: PodAttribution, have_chips: bool) -> None:
        # Without any chip (npu-smi not read yet, or failing) every device is unmatched: that
        # is npu-smi's failure, already logged and counted by its own source.
        key = (att.resource_name, att.device_id or str(att.device))
        if not have_chips or key in self._logged:
            return
        if len(self._logged) >= 4096:
            self._logged.clear()
        self._logged.add(key)
        log.warning(
            "kubelet device matches no chip on this node",
            extra={
                "resource": att.resource_name,
                "device_id": key[1],
                "chip_id": att.device,
                "match_on": self.match_on,
                "namespace": att.namespace,
                "pod": att.pod,
                "container": att.container,
            },
        )
