"""How npu-smi's key/value outputs are read: lines, keys, values and chip blocks.

npu-smi prints every `-t` line as ``\\t%-30s : %s`` (``%-40s`` for ecc), but copies in the
wild lose the TAB, expand it to spaces or drop the padding, so lines are stripped, split on
the FIRST ``:`` and keys compared after collapsing whitespace (and the space of
``NPU Temperature (C)``) and case. Unknown keys are ignored; vNPU mode simply omits keys.

In the per-chip outputs (usages, memory, ecc, health) ``Chip ID : c`` is the LAST line of
each chip block; `-t common` is the exception and opens each block with it. Ascend 950
(NPU_SMI_V2) prints neither Chip Count nor Chip ID: its one block is chip 0.

Some outputs never name their NPU (`-t health -i N -c C`, cut-short copies): those parsers
take the `-i` id the caller used as the keyword ``npu_id``; the text's own NPU ID wins.

Truncation: a whole-card answer prints ``Chip Count : k`` and then k chip blocks, each closed
by its Chip ID line (npu-smi's show_ascend_card_info), so fewer complete blocks than announced
is a cut output (``truncated``). Not a cut:
- a query for one chip (keyword ``chip_id``, the `-c` id): npu-smi itself prints the chip's
  fields only, the simulator prints one block under the card's Chip Count;
- fewer blocks followed by the MCU/CPU block ("Chip Name" line): the printer finished its chip
  loop and skipped a chip that does not support the type;
- one complete block with nothing after it: the simulator's `-c` answer, which callers also
  parse without ``chip_id`` (tests/simulator/test_roundtrip.py). A card output cut right after
  its first block reads the same, so for it this gap remains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from exporter.core.values import is_placeholder, to_float, to_int
from exporter.npusmi.parse.errors import check_output
from exporter.npusmi.parse.records import NpuSmiError

# --- lines and values ------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One non-blank output line."""

    raw: str  # the line, stripped
    key: str | None  # normalised key (see norm); None when the line has no ':'
    label: str  # the key as printed, whitespace collapsed
    value: str  # text after the first ':', stripped


def norm(label: str) -> str:
    """Key used for matching: one space between words, no space before '(', casefolded."""
    return " ".join(label.split()).replace(" (", "(").casefold()


def read_lines(text: str) -> list[Line]:
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        # The FIRST ':' separates: values hold more (PCIe "0000:61:00.0", health's
        # "Failed to get error information for error code : 0x..").
        key, sep, value = line.partition(":")
        if sep:
            label = " ".join(key.split())
            out.append(Line(line, norm(label), label, value.strip()))
        else:
            out.append(Line(line, None, "", ""))
    return out


def first_token(value: str) -> str:
    # Only the first word counts: annotated copies append comments after the number.
    parts = value.split(maxsplit=1)
    return parts[0] if parts else ""


def int_value(value: str) -> int | None:
    return to_int(first_token(value))


def float_value(value: str) -> float | None:
    return to_float(first_token(value))


def str_value(value: str) -> str | None:
    value = " ".join(value.split())
    return None if is_placeholder(value) else value


Convert = Callable[[str], Any]
KeySpec = dict[str, tuple[str, Convert]]  # normalised key -> (record field, converter)


def key_spec(*entries: tuple[str, Convert, Sequence[str]]) -> KeySpec:
    """Map every printed spelling of a key to its record field."""
    return {norm(label): (field, convert) for field, convert, labels in entries for label in labels}


def apply_spec(lines: Iterable[Line], spec: KeySpec) -> dict[str, Any]:
    """Record fields found in ``lines``; the first spelling seen wins."""
    fields: dict[str, Any] = {}
    for line in lines:
        if line.key in spec:
            field, convert = spec[line.key]
            if field not in fields:
                fields[field] = convert(line.value)
    return fields


def garbled(what: str) -> NpuSmiError:
    return NpuSmiError("garbled", f"no recognisable {what} output")


def truncated(what: str) -> NpuSmiError:
    return NpuSmiError("truncated", f"{what} output has no complete chip block")


def resolve_npu_id(printed: int | None, given: int | None) -> int:
    if printed is not None:
        return printed
    if given is not None:
        return given
    raise NpuSmiError("truncated", "output names no NPU ID and no npu_id was given")


# --- the one block splitter for per-chip `-t` outputs ------------------------------------

NPU_ID, CHIP_COUNT, CHIP_ID, CHIP_NAME = (norm(k) for k in ("NPU ID", "Chip Count", "Chip ID", "Chip Name"))
HEADER_KEYS = frozenset({NPU_ID, CHIP_COUNT})


def read_output(text: str, what: str, keys: Container[str | None], *, structure: bool = True) -> list[Line]:
    """The lines of ``text`` once npu-smi's own error messages are ruled out (check_output); a
    garbled output when no line has a key of ``keys`` or, with ``structure``, NPU ID, Chip
    Count or Chip ID."""
    check_output(text)
    lines = read_lines(text)
    if not any(line.key in keys or (structure and (line.key in HEADER_KEYS or line.key == CHIP_ID)) for line in lines):
        raise garbled(what)
    return lines


@dataclass(frozen=True)
class Blocks:
    npu_id: int | None  # "NPU ID" as printed
    chip_count: int | None  # "Chip Count" as printed
    chips: list[tuple[int, list[Line]]]  # (chip id, lines) for every closed block
    tail: list[Line]  # lines after the last "Chip ID" line


def first_int(lines: Sequence[Line], key: str) -> int | None:
    """The first readable number printed under ``key`` (NPU ID, Chip Count); repeats are ignored."""
    return next((number for line in lines if line.key == key and (number := int_value(line.value)) is not None), None)


def split_chips(lines: Sequence[Line]) -> Blocks:
    """Group lines into chip blocks closed by their trailing ``Chip ID`` line."""
    chips: list[tuple[int, list[Line]]] = []
    current: list[Line] = []
    for line in lines:
        if line.key == CHIP_ID:
            chip_id = int_value(line.value)
            if chip_id is not None:  # an unreadable id loses its block, not the output
                chips.append((chip_id, current))
            current = []
        elif line.key not in HEADER_KEYS:
            current.append(line)
    return Blocks(first_int(lines, NPU_ID), first_int(lines, CHIP_COUNT), chips, current)


def implicit_chip(blocks: Blocks, has_data: Callable[[list[Line]], bool], chip_id: int | None) -> list[tuple[int, list[Line]]]:
    """The chip blocks, where an output without Chip Count and Chip ID lines is one chip.

    That is 950 V2 (one chip per NPU: chip 0) and npu-smi's own `-c` answer (the chip queried).
    With a Chip Count line the output is a card answer whose trailing block, without its
    Chip ID line, was cut short: it is dropped (and check_chip_count reports the cut).
    """
    if blocks.chips or not has_data(blocks.tail) or blocks.chip_count is not None:
        return blocks.chips
    return [(0 if chip_id is None else chip_id, blocks.tail)]


# "Failed to query npu chip: 1 info." follows that chip's Chip ID line; the MCU has its own.
QUERY_FAILED_RE = re.compile(r"failed to query", re.IGNORECASE)


def check_chip_count(
    what: str, chip_count: int | None, found: int, chip_id: int | None, *, loop_ended: bool, lone_block_whole: bool
) -> None:
    """Raise ``truncated`` when fewer chip blocks than ``Chip Count`` were printed.

    ``loop_ended``: the MCU/CPU block ("Chip Name") follows the chips, so npu-smi finished its
    chip loop and skipped any chip missing. ``lone_block_whole``: a single block is closed by
    its Chip ID line and nothing follows it, as in a `-c` answer of the simulator.
    """
    if chip_count is None or found >= chip_count or chip_id is not None or loop_ended:
        return
    if found == 1 and lone_block_whole:
        return
    raise NpuSmiError("truncated", f"{what} output has {found} complete chip block(s) of the {chip_count} its Chip Count announces")


def check_blocks(what: str, blocks: Blocks, found: int, chip_id: int | None) -> None:
    """check_chip_count for outputs whose blocks end with Chip ID; ``blocks.tail`` follows them."""
    check_chip_count(
        what,
        blocks.chip_count,
        found,
        chip_id,
        loop_ended=any(line.key == CHIP_NAME for line in blocks.tail),
        lone_block_whole=all(QUERY_FAILED_RE.match(line.raw) for line in blocks.tail),
    )


def per_chip(text: str, what: str, spec: KeySpec, npu_id: int | None, chip_id: int | None) -> tuple[int, list[tuple[int, list[Line]]]]:
    """Shared front half of the per-chip parsers: errors, structure, NPU id, chip blocks."""
    known = spec.keys()
    blocks = split_chips(read_output(text, what, known))
    chips = implicit_chip(blocks, lambda block: any(line.key in known for line in block), chip_id)
    if not chips:
        raise truncated(what)
    check_blocks(what, blocks, len(chips), chip_id)
    return resolve_npu_id(blocks.npu_id, npu_id), chips


R = TypeVar("R")


def spec_records(record: Callable[..., R], text: str, what: str, spec: KeySpec, npu_id: int | None, chip_id: int | None) -> tuple[R, ...]:
    """A per-chip parser whose record is exactly its spec's fields: one ``record`` per chip block."""
    npu, chips = per_chip(text, what, spec, npu_id, chip_id)
    return tuple(record(npu_id=npu, chip_id=chip, **apply_spec(block, spec)) for chip, block in chips)
