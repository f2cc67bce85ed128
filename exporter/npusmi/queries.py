"""The per-chip health and interconnect queries: which `-t` types, in which schedule group,
and which types a card does not answer.

Each query is asked per chip (`-i N -c C`): a `-c` answer holds that one chip's fields, so no
type depends on where its Chip ID line goes. A group is one sampler task with its own
interval (`npu_smi.hardware_interval`, `npu_smi.hccs_bw_interval`; a SIGHUP applies new
values); adding a type is one more ChipQuery line.

`-t hccs-bw` samples for `npu_smi.hccs_bw_time` and blocks that long, so its group runs its
chips one after another: it holds at most one of the runner's slots, and the overview (an
urgent call) always finds another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from exporter.npusmi.options import NpuSmiOptions
from exporter.npusmi.parse import (
    CommonInfo,
    NpuSmiError,
    parse_common,
    parse_current_fault_event,
    parse_ecc,
    parse_hccs,
    parse_hccs_bandwidth,
    parse_memory,
    parse_pcie_errors,
    parse_sensors,
    parse_sio,
    parse_superpod,
    parse_usages,
    parse_volt,
)

log = logging.getLogger("exporter.npusmi")

Parser = Callable[..., Any]  # (text, *, npu_id, chip_id) -> one record or a tuple of them


class ChipRecord(Protocol):
    """A parsed `-t` answer for one chip: kept under (kind, (npu_id, chip_id))."""

    @property
    def npu_id(self) -> int: ...

    @property
    def chip_id(self) -> int: ...


@dataclass(frozen=True)
class Group:
    task: str  # the sampler task and self-metric source name
    interval: str  # the NpuSmiOptions field holding its interval
    serial: bool = False  # one call at a time (calls that block for a sampling time)


HARDWARE = Group("npu_smi_hardware", "hardware_interval")
HCCS_BW = Group("npu_smi_hccs_bw", "hccs_bw_interval", serial=True)
GROUPS = (HARDWARE, HCCS_BW)


def _no_args(options: NpuSmiOptions) -> tuple[str, ...]:
    return ()


def _sample_time(options: NpuSmiOptions) -> tuple[str, ...]:
    return ("-time", str(max(1, round(options.hccs_bw_time * 1000))))


@dataclass(frozen=True)
class ChipQuery:
    kind: str  # its name in npu_smi.hardware and the key of its records
    types: tuple[str, ...]  # the `-t` types tried in order; an unsupported one passes to the next
    parse: Parser
    group: Group | None  # None: read at inventory time
    args: Callable[[NpuSmiOptions], tuple[str, ...]] = _no_args


CHIP_QUERIES = (
    ChipQuery("volt", ("volt",), parse_volt, HARDWARE),
    ChipQuery("pcie-err", ("pcie-err", "err-count"), parse_pcie_errors, HARDWARE),  # err-count: Atlas 310 cards
    ChipQuery("sensors", ("sensors",), parse_sensors, HARDWARE),
    ChipQuery("sio-info", ("sio-info",), parse_sio, HARDWARE),
    ChipQuery("hccs", ("hccs",), parse_hccs, HARDWARE),
    ChipQuery("hccs-bw", ("hccs-bw",), parse_hccs_bandwidth, HCCS_BW, _sample_time),
)
SUPERPOD = ChipQuery("spod-info", ("spod-info",), parse_superpod, None)


def group_queries(group: Group, kinds: Iterable[str]) -> tuple[ChipQuery, ...]:
    wanted = set(kinds)
    return tuple(q for q in CHIP_QUERIES if q.group == group and q.kind in wanted)


def records_of(result: object) -> tuple[Any, ...]:
    return result if isinstance(result, tuple) else (result,)


def is_unsupported(error: NpuSmiError) -> bool:
    """npu-smi's "This device does not support querying <type>." (not a dcmi -8255 failure)."""
    return error.reason == "not_supported" and "support querying" in str(error)


class Unsupported:
    """The `-t` types each card answered it does not support: a fact about the product, not a
    failure, so they are not asked again until the inventory (chips, driver) changes."""

    def __init__(self) -> None:
        self._types: set[tuple[str, int]] = set()
        self._inventory: object = None

    def renew(self, inventory: object) -> None:
        if inventory != self._inventory:
            self._types.clear()
            self._inventory = inventory

    def add(self, type: str, npu: int) -> None:
        if (type, npu) not in self._types:
            log.info(
                "npu-smi: a card does not support a query; not asked again until the inventory changes", extra={"type": type, "npu": npu}
            )
        self._types.add((type, npu))

    def __contains__(self, item: tuple[str, int]) -> bool:
        return item in self._types

    def __len__(self) -> int:
        return len(self._types)


# The per-card `-t` queries' parsers, by kind (npu_smi.details).
CARD_PARSERS: dict[str, Callable[..., tuple[Any, ...] | CommonInfo]] = {
    "usages": parse_usages,
    "common": parse_common,
    "ecc": parse_ecc,
    "memory": parse_memory,
    "current-fault-event": parse_current_fault_event,  # Ascend 950: its event ids are fault codes
}
