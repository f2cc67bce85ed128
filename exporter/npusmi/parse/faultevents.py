"""`npu-smi info -t current-fault-event -i N [-c C]` (Ascend 950): the chip's active fault events.

    Fault Event Count              : 1
    Fault Event Information        : event id=0x81AF8000, severity=2, node type ex=215, node id=0, ...

One "Fault Event Information" line per event; its value is comma-separated ``name=value`` pairs.
The event id is a fault code of the fault-code table (``0x`` and hex). Products without the type
answer "This device does not support querying ..." (reason ``not_supported``, check_output).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.npusmi.parse.keyvalue import (
    Line,
    check_blocks,
    implicit_chip,
    int_value,
    norm,
    read_output,
    resolve_npu_id,
    split_chips,
)
from exporter.npusmi.parse.records import NpuSmiError

_COUNT, _INFO = norm("Fault Event Count"), norm("Fault Event Information")
_WHAT = "`-t current-fault-event`"
MAX_ID_DIGITS = 16  # event ids are 8 hex digits
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class FaultEvent:
    event_id: str  # upper-case hex without 0x, the fault-code table's spelling
    severity: int | None = None  # "severity=N" as printed


@dataclass(frozen=True)
class ChipFaultEvents:
    """`-t current-fault-event`, one chip."""

    npu_id: int
    chip_id: int
    events: tuple[FaultEvent, ...] = ()


def _event(value: str) -> FaultEvent:
    """One "Fault Event Information" value; NpuSmiError when it holds no readable event id."""
    fields: dict[str, str] = {}
    for pair in value.split(","):
        name, sep, text = pair.partition("=")
        if sep:
            fields.setdefault(" ".join(name.split()).casefold(), text.strip())
    raw = fields.get("event id", "")
    digits = raw[2:] if raw[:2] in ("0x", "0X") else raw
    if not digits or len(digits) > MAX_ID_DIGITS or not set(digits) <= _HEX:
        raise NpuSmiError("garbled", f"{_WHAT}: no readable event id in {value[:80]!r}")
    return FaultEvent(digits.upper(), int_value(fields.get("severity", "")))


def _events(block: list[Line]) -> tuple[FaultEvent, ...]:
    count = next((int_value(line.value) for line in block if line.key == _COUNT), None)
    events = tuple(_event(line.value) for line in block if line.key == _INFO)
    if count is not None and len(events) < count:
        raise NpuSmiError("truncated", f"{_WHAT} output lists {len(events)} of the {count} events its Fault Event Count announces")
    return events


def parse_current_fault_event(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipFaultEvents, ...]:
    """One record per chip (950 prints no Chip ID: its one block is chip 0, or the ``chip_id`` queried)."""
    blocks = split_chips(read_output(text, _WHAT, (_COUNT, _INFO)))
    chips = implicit_chip(blocks, lambda block: any(line.key in (_COUNT, _INFO) for line in block), chip_id)
    if not chips:
        raise NpuSmiError("truncated", f"{_WHAT} output has no complete chip block")
    check_blocks(_WHAT, blocks, len(chips), chip_id)
    npu = resolve_npu_id(blocks.npu_id, npu_id)
    return tuple(ChipFaultEvents(npu, chip, _events(block)) for chip, block in chips)
