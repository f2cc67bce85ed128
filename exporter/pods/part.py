"""The pods part of the snapshot: which pod holds each chip, matched against npu-smi's chips.

Matching: the Ascend device plugin numbers devices by the chip's physical id (kubelet.py).
With ``match_on="physical"`` (the default) a device matches the chip whose ``phy_id`` it
equals, or, where npu-smi reports no physical id (everything but A3), the chip whose logic id
(``device`` label) it equals. ``"logic"`` matches logic ids only, for device plugins that
number devices by logic id. A chip no attribution names gets no series; an attribution that
names no chip is counted under ``no_chip``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.core.snapshot import PartKey
from exporter.npusmi.part import ChipSample
from exporter.pods.kubelet import SKIP_REASONS, PodAttribution

UNMATCHED_NO_CHIP = "no_chip"
UNMATCHED_REASONS = (UNMATCHED_NO_CHIP, *SKIP_REASONS)


@dataclass(frozen=True)
class ChipPod:
    """One chip and a container it is allocated to."""

    npu: int
    chip: int
    device: int | None
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class PodsPart:
    chips: tuple[ChipPod, ...] = ()
    unmatched: tuple[tuple[str, int], ...] = ()  # (reason, kubelet devices) for every reason


@dataclass(frozen=True)
class Matched:
    part: PodsPart
    no_chip: tuple[PodAttribution, ...]  # attributions that name no chip here


def chip_key(chip: ChipSample, match_on: str) -> int | None:
    if match_on == "physical" and chip.phy_id is not None:
        return chip.phy_id
    return chip.device


def match(attributions: Iterable[PodAttribution], chips: Iterable[ChipSample], match_on: str, skipped: Mapping[str, int]) -> Matched:
    """Pair each attribution with the chips it names; one ChipPod per (chip, pod, container)."""
    by_id: dict[int, list[ChipSample]] = {}
    for chip in chips:
        key = chip_key(chip, match_on)
        if key is not None:
            by_id.setdefault(key, []).append(chip)
    found: dict[ChipPod, None] = {}
    no_chip = []
    for att in attributions:
        matches = by_id.get(att.device)
        if not matches:
            no_chip.append(att)
            continue
        for chip in matches:
            found.setdefault(ChipPod(chip.npu, chip.chip, chip.device, att.namespace, att.pod, att.container))
    counts = dict.fromkeys(UNMATCHED_REASONS, 0)
    counts[UNMATCHED_NO_CHIP] = len(no_chip)
    for reason, count in skipped.items():
        counts[reason] = counts.get(reason, 0) + count
    return Matched(PodsPart(tuple(found), tuple(sorted(counts.items()))), tuple(no_chip))


PODS = PartKey("pods", PodsPart)  # its snapshot key
