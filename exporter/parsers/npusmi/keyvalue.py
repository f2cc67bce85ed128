"""Parsers for npu-smi's key/value outputs: `info -m`, `info -l`, `info -t <type>`.

npu-smi prints every `-t` line as ``\\t%-30s : %s`` (``%-40s`` for ecc), but copies in the
wild lose the TAB, expand it to spaces or drop the padding, so lines are stripped, split on
the FIRST ``:`` and keys compared after collapsing whitespace (and the space of
``NPU Temperature (C)``) and case. Unknown keys are ignored; vNPU mode simply omits keys.

In the per-chip outputs (usages, memory, power, temp, ecc, proc-mem, health) ``Chip ID : c``
is the LAST line of each chip block; `-t common` is the exception and opens each block with
it. Ascend 950 (NPU_SMI_V2) prints neither Chip Count nor Chip ID: its one block is chip 0.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.parsers.npusmi.errors import check_output
from exporter.parsers.npusmi.records import (
    BoardInfo,
    CardInfo,
    ChipCommon,
    ChipEcc,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipPower,
    ChipUsages,
    CommonInfo,
    NpuSmiError,
    ProcMemEntry,
    TempInfo,
)

# --- lines and values ------------------------------------------------------------------

# Values npu-smi prints for "no reading" (NA on 310P power, "-" on the 2nd A3 die, ...).
_PLACEHOLDERS = frozenset({"", "-", "--", "na", "n/a"})
# Bounded digit runs: int() refuses >4300 digits and a counter never needs more than 30.
_INT_RE = re.compile(r"[+-]?[0-9]{1,30}", re.ASCII)
_FLOAT_RE = re.compile(r"[+-]?[0-9]{1,30}(?:\.[0-9]{1,30})?", re.ASCII)


@dataclass(frozen=True)
class _Line:
    """One non-blank output line."""

    raw: str            # the line, stripped
    key: str | None     # normalised key (see _norm); None when the line has no ':'
    label: str          # the key as printed, whitespace collapsed
    value: str          # text after the first ':', stripped


def _norm(label: str) -> str:
    """Key used for matching: one space between words, no space before '(', casefolded."""
    return " ".join(label.split()).replace(" (", "(").casefold()


def _lines(text: str) -> list[_Line]:
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
            out.append(_Line(line, _norm(label), label, value.strip()))
        else:
            out.append(_Line(line, None, "", ""))
    return out


def _first_token(value: str) -> str:
    # Only the first word counts: annotated copies append comments after the number.
    parts = value.split(maxsplit=1)
    return parts[0] if parts else ""


def _int(value: str) -> int | None:
    token = _first_token(value)
    return int(token) if _INT_RE.fullmatch(token) else None


def _float(value: str) -> float | None:
    token = _first_token(value)
    return float(token) if _FLOAT_RE.fullmatch(token) else None


def _str(value: str) -> str | None:
    value = " ".join(value.split())
    return None if value.casefold() in _PLACEHOLDERS else value


_Convert = Callable[[str], Any]
_Spec = dict[str, tuple[str, _Convert]]   # normalised key -> (record field, converter)


def _spec(*entries: tuple[str, _Convert, Sequence[str]]) -> _Spec:
    """Map every printed spelling of a key to its record field."""
    return {_norm(label): (field, convert) for field, convert, labels in entries for label in labels}


def _apply(lines: Iterable[_Line], spec: _Spec) -> dict[str, Any]:
    """Record fields found in ``lines``; the first spelling seen wins."""
    fields: dict[str, Any] = {}
    for line in lines:
        if line.key in spec:
            field, convert = spec[line.key]
            if field not in fields:
                fields[field] = convert(line.value)
    return fields


def _garbled(what: str) -> NpuSmiError:
    return NpuSmiError("garbled", f"no recognisable {what} output")


def _truncated(what: str) -> NpuSmiError:
    return NpuSmiError("truncated", f"{what} output has no complete chip block")


def _resolve_npu_id(printed: int | None, given: int | None) -> int:
    if printed is not None:
        return printed
    if given is not None:
        return given
    raise NpuSmiError("truncated", "output names no NPU ID and no npu_id was given")


# --- the one block splitter for per-chip `-t` outputs ------------------------------------

_NPU_ID, _CHIP_COUNT, _CHIP_ID, _CHIP_NAME = (_norm(k) for k in ("NPU ID", "Chip Count", "Chip ID", "Chip Name"))
_HEADER_KEYS = frozenset({_NPU_ID, _CHIP_COUNT})


@dataclass(frozen=True)
class _Blocks:
    npu_id: int | None                            # "NPU ID" as printed
    chip_count: int | None                        # "Chip Count" as printed
    chips: list[tuple[int, list[_Line]]]          # (chip id, lines) for every closed block
    tail: list[_Line]                             # lines after the last "Chip ID" line


def _split_chips(lines: Iterable[_Line]) -> _Blocks:
    """Group lines into chip blocks closed by their trailing ``Chip ID`` line."""
    npu_id = chip_count = None
    chips: list[tuple[int, list[_Line]]] = []
    current: list[_Line] = []
    for line in lines:
        if line.key == _NPU_ID:
            npu_id = _int(line.value) if npu_id is None else npu_id
        elif line.key == _CHIP_COUNT:
            chip_count = _int(line.value) if chip_count is None else chip_count
        elif line.key == _CHIP_ID:
            chip_id = _int(line.value)
            if chip_id is not None:           # an unreadable id loses its block, not the output
                chips.append((chip_id, current))
            current = []
        else:
            current.append(line)
    return _Blocks(npu_id, chip_count, chips, current)


def _implicit_chip(blocks: _Blocks, has_data: Callable[[list[_Line]], bool],
                   chip_id: int | None) -> list[tuple[int, list[_Line]]]:
    """The chip blocks, where an output without Chip Count and Chip ID lines is one chip.

    That is 950 V2 (one chip per NPU: chip 0) and npu-smi's own `-c` answer (the chip queried).
    With a Chip Count line the output is a card answer whose trailing block, without its
    Chip ID line, was cut short: it is dropped (and _check_chip_count reports the cut).
    """
    if blocks.chips or not has_data(blocks.tail) or blocks.chip_count is not None:
        return blocks.chips
    return [(0 if chip_id is None else chip_id, blocks.tail)]


# "Failed to query npu chip: 1 info." follows that chip's Chip ID line; the MCU has its own.
_QUERY_FAILED_RE = re.compile(r"failed to query", re.IGNORECASE)


def _check_chip_count(what: str, chip_count: int | None, found: int, chip_id: int | None, *,
                      loop_ended: bool, lone_block_whole: bool) -> None:
    """Raise ``truncated`` when fewer chip blocks than ``Chip Count`` were printed.

    ``loop_ended``: the MCU/CPU block ("Chip Name") follows the chips, so npu-smi finished its
    chip loop and skipped any chip missing. ``lone_block_whole``: a single block is closed by
    its Chip ID line and nothing follows it, as in a `-c` answer of the simulator.
    """
    if chip_count is None or found >= chip_count or chip_id is not None or loop_ended:
        return
    if found == 1 and lone_block_whole:
        return
    raise NpuSmiError("truncated", f"{what} output has {found} complete chip block(s) of the {chip_count} "
                                   "its Chip Count announces")


def _check_blocks(what: str, blocks: _Blocks, found: int, chip_id: int | None) -> None:
    """_check_chip_count for outputs whose blocks end with Chip ID; ``blocks.tail`` follows them."""
    _check_chip_count(
        what, blocks.chip_count, found, chip_id,
        loop_ended=any(line.key == _CHIP_NAME for line in blocks.tail),
        lone_block_whole=all(_QUERY_FAILED_RE.match(line.raw) for line in blocks.tail),
    )


def _per_chip(text: str, what: str, spec: _Spec, npu_id: int | None,
              chip_id: int | None) -> tuple[int, list[tuple[int, list[_Line]]]]:
    """Shared front half of the per-chip parsers: errors, structure, NPU id, chip blocks."""
    check_output(text)
    lines = _lines(text)
    known = spec.keys()
    if not any(line.key in known or line.key in _HEADER_KEYS or line.key == _CHIP_ID for line in lines):
        raise _garbled(what)
    blocks = _split_chips(lines)
    chips = _implicit_chip(blocks, lambda block: any(line.key in known for line in block), chip_id)
    if not chips:
        raise _truncated(what)
    _check_blocks(what, blocks, len(chips), chip_id)
    return _resolve_npu_id(blocks.npu_id, npu_id), chips


# --- npu-smi info -m ---------------------------------------------------------------------

# Header names -> ChipMapEntry fields. A3 adds "Chip Phy-ID"; 950 has "Slot ID" and no logic id.
_MAP_COLUMNS = {
    "npu id": "npu_id", "chip id": "chip_id", "chip logic id": "logic_id",
    "chip phy-id": "phy_id", "slot id": "slot_id", "chip name": "chip_name",
}
# Known names, longest first, also split a header whose columns lost their padding.
_MAP_NAME_RE = re.compile("|".join(sorted(map(re.escape, _MAP_COLUMNS), key=len, reverse=True)))


def _map_columns(header: str) -> list[str]:
    columns: list[str] = []
    for piece in re.split(r"\t|\s{2,}", header.strip()):
        piece = " ".join(piece.split()).casefold()
        if not piece:
            continue
        known = _MAP_NAME_RE.findall(piece)
        # A piece made only of known names is split into them; anything else is one column.
        columns.extend(known if known and " ".join(known) == piece else [piece])
    return columns


def parse_chip_map(text: str) -> tuple[ChipMapEntry, ...]:
    """`npu-smi info -m`: every row, Mcu and CPU rows included (their logic id is None)."""
    check_output(text)
    rows = text.splitlines()
    start = next((i for i, row in enumerate(rows) if " ".join(row.split()).casefold().startswith("npu id")), None)
    if start is None:
        raise _garbled("`info -m`")
    columns = _map_columns(rows[start])
    if "npu id" not in columns or "chip id" not in columns:
        raise _garbled("`info -m`")
    entries = []
    for row in rows[start + 1:]:
        # Every column but the last is one token; the last (Chip Name) may hold a space.
        cells = dict(zip(columns, row.split(None, len(columns) - 1)))
        if len(cells) < len(columns):
            continue
        npu_id, chip_id = _int(cells["npu id"]), _int(cells["chip id"])
        if npu_id is None or chip_id is None:
            continue
        entries.append(ChipMapEntry(
            npu_id=npu_id,
            chip_id=chip_id,
            logic_id=_int(cells.get("chip logic id", "")),
            chip_name=" ".join(cells.get("chip name", "").split()),
            phy_id=_int(cells.get("chip phy-id", "")),
            slot_id=_int(cells.get("slot id", "")),
        ))
    if not entries:
        raise NpuSmiError("truncated", "`info -m` output has a header but no rows")
    return tuple(entries)


# --- npu-smi info -l ---------------------------------------------------------------------

_CARD_SPEC = _spec(
    ("product_name", _str, ["Product Name"]),
    ("serial_number", _str, ["Serial Number"]),
    ("chip_count", _int, ["Chip Count"]),
)
_CARD_TOTALS = frozenset({_norm("Total Count"), _norm("Card Count")})   # 310/310B say "Card Count"


def parse_card_list(text: str) -> tuple[CardInfo, ...]:
    """`npu-smi info -l`: one record per ``NPU ID`` block."""
    check_output(text)
    lines = _lines(text)
    if not any(line.key in _CARD_TOTALS or line.key == _NPU_ID for line in lines):
        raise _garbled("`info -l`")
    cards: list[tuple[int, list[_Line]]] = []
    for line in lines:
        if line.key == _NPU_ID:
            npu_id = _int(line.value)
            if npu_id is not None:
                cards.append((npu_id, []))
        elif cards:
            cards[-1][1].append(line)
    if not cards:
        raise NpuSmiError("truncated", "`info -l` output lists no NPU")
    return tuple(CardInfo(npu_id=npu_id, **_apply(block, _CARD_SPEC)) for npu_id, block in cards)


# --- -t usages ---------------------------------------------------------------------------

_USAGES_SPEC = _spec(
    # 310/310B print "Memory ..." and plain "Hugepages ..." where the rest print "DDR ...".
    ("ddr_capacity_mb", _int, ["DDR Capacity(MB)", "Memory Capacity(MB)"]),
    ("ddr_usage_percent", _float, ["DDR Usage Rate(%)", "Memory Usage Rate(%)"]),
    ("hugepages_total", _int, ["DDR Hugepages Total(page)", "Hugepages Total(page)"]),
    ("hugepages_usage_percent", _float, ["DDR Hugepages Usage Rate(%)", "Hugepages Usage Rate(%)"]),
    ("hbm_capacity_mb", _int, ["HBM Capacity(MB)"]),
    ("hbm_usage_percent", _float, ["HBM Usage Rate(%)"]),
    ("aicore_percent", _float, ["Aicore Usage Rate(%)"]),
    ("aivector_percent", _float, ["Aivector Usage Rate(%)", "Vectorcore Usage Rate(%)"]),  # 310P: Vectorcore
    ("aicube_percent", _float, ["Aicube Usage Rate(%)"]),
    ("aicpu_percent", _float, ["Aicpu Usage Rate(%)"]),
    ("ctrlcpu_percent", _float, ["Ctrlcpu Usage Rate(%)"]),
    ("ddr_bandwidth_percent", _float, ["DDR Bandwidth Usage Rate(%)", "Memory Bandwidth Usage Rate(%)"]),
    ("hbm_bandwidth_percent", _float, ["HBM Bandwidth Usage Rate(%)"]),
    ("npu_util_percent", _float, ["NPU Utilization(%)"]),
)


def parse_usages(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipUsages, ...]:
    """`npu-smi info -t usages -i N [-c C]`: one record per chip; pass ``chip_id=C`` with `-c`."""
    npu, chips = _per_chip(text, "`-t usages`", _USAGES_SPEC, npu_id, chip_id)
    return tuple(ChipUsages(npu_id=npu, chip_id=chip, **_apply(block, _USAGES_SPEC)) for chip, block in chips)


# --- -t common ---------------------------------------------------------------------------

_COMMON_SPEC = _spec(
    ("memory_usage_percent", _float, ["Memory Usage Rate(%)"]),
    ("hbm_usage_percent", _float, ["HBM Usage Rate(%)"]),
    ("aicore_percent", _float, ["Aicore Usage Rate(%)"]),
    ("aicore_freq_mhz", _float, ["Aicore Freq(MHZ)"]),
    ("aicore_cur_freq_mhz", _float, ["Aicore curFreq(MHZ)"]),
    ("aicore_count", _int, ["Aicore Count"]),
    ("temperature_celsius", _float, ["Temperature(C)"]),
    ("power_watts", _float, ["NPU Real-time Power(W)"]),
    ("rated_power_watts", _float, ["Rated Power Dissipation(W)"]),
)
# The MCU block: its own Temperature(C) and, on 310P, the card's real-time power.
_MCU_SPEC = _spec(
    ("mcu_temperature_celsius", _float, ["Temperature(C)"]),
    ("mcu_power_watts", _float, ["NPU Real-time Power(W)"]),
)


def parse_common(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> CommonInfo:
    """`npu-smi info -t common -i N`: chip blocks (opened by Chip ID) and the MCU block.

    The MCU block ("Chip Name : mcu") repeats Temperature(C): it is kept apart so that it never
    overwrites the chip's. A 3559 CPU block ("Chip Name : 3559") is skipped.
    """
    check_output(text)
    lines = _lines(text)
    if not any(line.key in _COMMON_SPEC or line.key in _HEADER_KEYS or line.key == _CHIP_ID for line in lines):
        raise _garbled("`-t common`")
    printed_npu = chip_count = None
    leading: list[_Line] = []                        # data before any Chip ID / Chip Name line
    chips: list[tuple[int, list[_Line]]] = []
    others: list[tuple[str, list[_Line]]] = []       # (chip name, lines) of MCU/CPU blocks
    current = leading
    for line in lines:
        if line.key == _NPU_ID:
            printed_npu = _int(line.value) if printed_npu is None else printed_npu
        elif line.key == _CHIP_COUNT:
            chip_count = _int(line.value) if chip_count is None else chip_count
        elif line.key == _CHIP_ID:
            current = []
            printed_chip = _int(line.value)
            if printed_chip is not None:
                chips.append((printed_chip, current))
        elif line.key == _CHIP_NAME:
            current = []
            others.append((line.value.casefold(), current))
        else:
            current.append(line)
    if not chips and chip_count is None and any(line.key in _COMMON_SPEC for line in leading):
        chips = [(0 if chip_id is None else chip_id, leading)]  # 950 V2 or a `-c` answer: no Chip ID line
    mcu = next((block for name, block in others if name == "mcu"), [])
    if not chips and not mcu:
        raise _truncated("`-t common`")
    # Chip ID (and Chip Name) open a block here: as the last line they are a cut output, and a
    # lone block is never known to be whole.
    if lines[-1].key in (_CHIP_ID, _CHIP_NAME):
        raise NpuSmiError("truncated", f"`-t common` output ends after {lines[-1].raw!r}")
    _check_chip_count("`-t common`", chip_count, len(chips), chip_id, loop_ended=bool(others), lone_block_whole=False)
    npu = _resolve_npu_id(printed_npu, npu_id)
    return CommonInfo(
        npu_id=npu,
        chips=tuple(ChipCommon(npu_id=npu, chip_id=chip, **_apply(block, _COMMON_SPEC)) for chip, block in chips),
        **_apply(mcu, _MCU_SPEC),
    )


# --- -t memory / -t power / -t ecc -----------------------------------------------------

_MEMORY_SPEC = _spec(
    ("ddr_capacity_mb", _int, ["DDR Capacity(MB)", "Capacity(MB)"]),          # 310/310B: no "DDR "
    ("ddr_clock_mhz", _float, ["DDR Clock Speed(MHz)", "Clock Speed(MHz)"]),
    ("hbm_capacity_mb", _int, ["HBM Capacity(MB)"]),
    ("hbm_clock_mhz", _float, ["HBM Clock Speed(MHz)"]),
    ("hbm_temperature_celsius", _float, ["HBM Temperature(C)"]),
    ("hbm_manufacturer_id", _str, ["HBM Manufacturer ID"]),
)


def parse_memory(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipMemory, ...]:
    """`npu-smi info -t memory -i N`: one record per chip."""
    npu, chips = _per_chip(text, "`-t memory`", _MEMORY_SPEC, npu_id, chip_id)
    return tuple(ChipMemory(npu_id=npu, chip_id=chip, **_apply(block, _MEMORY_SPEC)) for chip, block in chips)


_POWER_SPEC = _spec(("power_watts", _float, ["NPU Real-time Power(W)"]))


def parse_power(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipPower, ...]:
    """`npu-smi info -t power -i N`: one record per chip."""
    npu, chips = _per_chip(text, "`-t power`", _POWER_SPEC, npu_id, chip_id)
    return tuple(ChipPower(npu_id=npu, chip_id=chip, **_apply(block, _POWER_SPEC)) for chip, block in chips)


_ECC_SPEC = _spec(
    # 310/310B print only "Single-bit/Double-bit Error Count" (their DDR).
    ("ddr_single_bit_errors", _int, ["DDR Single Bit Error Count", "Single-bit Error Count"]),
    ("ddr_double_bit_errors", _int, ["DDR Double Bit Error Count", "Double-bit Error Count"]),
    ("ddr_single_bit_aggregate_total", _int, ["DDR Single Bit Aggregate Total Err Cnt"]),
    ("ddr_double_bit_aggregate_total", _int, ["DDR Double Bit Aggregate Total Err Cnt"]),
    ("ddr_single_bit_isolated_pages", _int, ["DDR Single Bit Isolated Pages Count"]),
    ("ddr_double_bit_isolated_pages", _int, ["DDR Double Bit Isolated Pages Count"]),
    ("hbm_single_bit_errors", _int, ["HBM Single Bit Error Count"]),
    ("hbm_double_bit_errors", _int, ["HBM Double Bit Error Count"]),
    ("hbm_single_bit_aggregate_total", _int, ["HBM Single Bit Aggregate Total Err Cnt"]),
    ("hbm_double_bit_aggregate_total", _int, ["HBM Double Bit Aggregate Total Err Cnt"]),
    ("hbm_single_bit_isolated_pages", _int, ["HBM Single Bit Isolated Pages Count"]),
    ("hbm_double_bit_isolated_pages", _int, ["HBM Double Bit Isolated Pages Count"]),
)


def parse_ecc(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipEcc, ...]:
    """`npu-smi info -t ecc -i N`: one record per chip (keys are padded to 40, not 30)."""
    npu, chips = _per_chip(text, "`-t ecc`", _ECC_SPEC, npu_id, chip_id)
    return tuple(ChipEcc(npu_id=npu, chip_id=chip, **_apply(block, _ECC_SPEC)) for chip, block in chips)


# --- -t temp -----------------------------------------------------------------------------

# Servers print "NPU Temperature (C)", cards "Temperature (C)" (normalised without the space).
_CHIP_TEMP_KEYS = frozenset({_norm("NPU Temperature (C)"), _norm("Temperature (C)")})
_TEMP_SPEC = _spec(("temperature", _float, ["NPU Temperature (C)", "Temperature (C)"]))


def _board_sensor(line: _Line) -> tuple[str, float | None] | None:
    """("LM75A_TE", 36.0) for an MCU sensor line "LM75A_TE (C) : 36"; "Failed"/"NA" read None."""
    if line.key is None or line.key in _CHIP_TEMP_KEYS or not line.key.endswith("(c)"):
        return None
    name = line.label[: -len("(C)")].strip()
    return (name, _float(line.value)) if name else None


def parse_temp(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> TempInfo:
    """`npu-smi info -t temp -i N`: chip temperatures, then the MCU's board sensors.

    The MCU block comes after the last Chip ID and ends with "Chip Name : MCU"; every
    "<name> (C)" line outside the chip temperature is a board sensor.
    """
    check_output(text)
    lines = _lines(text)
    blocks = _split_chips(lines)
    # Sensors live in the MCU block after the last Chip ID (the whole output on 950).
    sensors = [sensor for line in blocks.tail if (sensor := _board_sensor(line)) is not None]
    known = _TEMP_SPEC.keys() | _HEADER_KEYS | {_CHIP_ID}
    if not sensors and not any(line.key in known for line in lines):
        raise _garbled("`-t temp`")
    chips = _implicit_chip(blocks, lambda block: any(line.key in _CHIP_TEMP_KEYS for line in block), chip_id)
    if not chips and not sensors:
        raise _truncated("`-t temp`")
    _check_blocks("`-t temp`", blocks, len(chips), chip_id)
    # A card answer's MCU block ends with "Chip Name : MCU" (show_ascend_card_mcu_info).
    if sensors and blocks.chip_count is not None and not any(line.key == _CHIP_NAME for line in blocks.tail):
        raise NpuSmiError("truncated", "`-t temp` output ends inside the MCU block")
    return TempInfo(
        npu_id=_resolve_npu_id(blocks.npu_id, npu_id),
        chips=tuple((chip, _apply(block, _TEMP_SPEC).get("temperature")) for chip, block in chips),
        board_sensors=tuple(sensors),
    )


# --- -t health ---------------------------------------------------------------------------

_HEALTH_STATUS, _ERROR_CODE, _ERROR_INFO = (_norm(k) for k in ("Health Status", "Error Code", "Error Information"))
_HEALTH_KEYS = frozenset({_HEALTH_STATUS, _ERROR_CODE, _ERROR_INFO})
_UNRESOLVED = "failed to get error information"   # printed as its own line for a later code


def _error_information(block: Sequence[_Line]) -> tuple[str, ...]:
    """"Error Information" and its continuation lines (empty key, e.g. ``\\t<31 spaces>: text``)."""
    info: list[str] = []
    inside = False
    for line in block:
        if line.key == _ERROR_INFO:
            inside = True
            value = line.value
        elif inside and line.key == "":
            value = line.value
        elif inside and line.raw.casefold().startswith(_UNRESOLVED):
            value = line.raw
        else:
            inside = inside and line.key not in _HEALTH_KEYS
            continue
        if _str(value) is not None:
            info.append(" ".join(value.split()))
    return tuple(info)


def _error_codes(block: Sequence[_Line]) -> tuple[str, ...]:
    value = next((line.value for line in block if line.key == _ERROR_CODE), "")
    # "NA" (and "0" in some builds) mean no error; several codes are space-separated.
    return tuple(code for code in value.split() if code.casefold() not in _PLACEHOLDERS and code != "0")


def parse_health(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipHealth, ...]:
    """`npu-smi info -t health -i N [-c C]`.

    The `-c` form prints neither NPU ID nor Chip ID: pass the ids that were queried.
    """
    check_output(text)
    lines = _lines(text)
    if not any(line.key in _HEALTH_KEYS for line in lines):
        raise _garbled("`-t health`")
    blocks = _split_chips(lines)
    chips: list[tuple[int | None, list[_Line]]] = list(blocks.chips)
    if not chips:
        if blocks.chip_count is not None:           # a card answer cut before its first Chip ID
            raise _truncated("`-t health`")
        chips = [(chip_id, blocks.tail)]
    else:
        _check_blocks("`-t health`", blocks, len(chips), chip_id)
    records = tuple(
        ChipHealth(
            npu_id=_resolve_npu_id(blocks.npu_id, npu_id),
            chip_id=chip,
            status=_str(next((line.value for line in block if line.key == _HEALTH_STATUS), "")),
            error_codes=_error_codes(block),
            error_information=_error_information(block),
        )
        for chip, block in chips
        if any(line.key in _HEALTH_KEYS for line in block)
    )
    if not records:
        raise _truncated("`-t health`")
    return records


# --- -t board [-c] -----------------------------------------------------------------------

_BOARD_SPEC = _spec(
    ("chip_id", _int, ["Chip ID"]),
    ("product_name", _str, ["Product Name"]),
    ("model", _str, ["Model"]),
    ("serial_number", _str, ["Serial Number"]),
    ("software_version", _str, ["Software Version"]),
    ("firmware_version", _str, ["Firmware Version"]),
    ("chip_name", _str, ["Chip Name"]),
    ("pcie_bus_info", _str, ["PCIe Bus Info"]),
    ("chip_count", _int, ["Chip Count"]),
)
# The die serial: "VDie ID" on the 910 family, "Die ID" elsewhere (310/310B prefix it with
# the chip version, "V100, 0A0B..."), "DDie ID" on 950.
_DIE_KEYS = tuple(_norm(k) for k in ("VDie ID", "Die ID", "DDie ID"))


def _die_id(lines: Sequence[_Line]) -> str | None:
    for key in _DIE_KEYS:
        value = next((line.value for line in lines if line.key == key), None)
        if value is not None and (die := _str(value.rpartition(",")[2])) is not None:
            return die
    return None


def parse_board(text: str, *, npu_id: int | None = None) -> BoardInfo:
    """`npu-smi info -t board -i N` (card) or `... -c C` (chip; chip_id set)."""
    check_output(text)
    lines = _lines(text)
    if not any(line.key in _BOARD_SPEC or line.key in _DIE_KEYS or line.key == _NPU_ID for line in lines):
        raise _garbled("`-t board`")
    printed_npu = next((_int(line.value) for line in lines if line.key == _NPU_ID), None)
    return BoardInfo(
        npu_id=_resolve_npu_id(printed_npu, npu_id),
        vdie_id=_die_id(lines),
        fields=tuple((line.label, line.value) for line in lines if line.key is not None),
        **_apply(lines, _BOARD_SPEC),
    )


# --- -t proc-mem -------------------------------------------------------------------------

# "Process id:3233241 Process name:VLLMWorker_TP     Process memory(MB):55844": no space
# after the colons, the name padded to 17 and possibly empty (another PID namespace).
_PROC_RE = re.compile(
    r"Process id\s*:\s*([0-9]{1,18})\s+Process name\s*:(.*?)\s*Process memory\(MB\)\s*:\s*(\S*)",
    re.IGNORECASE | re.ASCII,
)
_NO_PROCESS = "no process in device"


def parse_proc_mem(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ProcMemEntry, ...]:
    """`npu-smi info -t proc-mem -i N [-c C]`: every process line; idle chips give nothing."""
    check_output(text)
    lines = _lines(text)

    def has_data(block: Iterable[_Line]) -> bool:
        return any(_PROC_RE.search(line.raw) or line.raw.casefold().startswith(_NO_PROCESS) for line in block)

    if not has_data(lines) and not any(line.key in _HEADER_KEYS or line.key == _CHIP_ID for line in lines):
        raise _garbled("`-t proc-mem`")
    blocks = _split_chips(lines)
    chips = _implicit_chip(blocks, has_data, chip_id)
    if not chips:
        raise _truncated("`-t proc-mem`")
    _check_blocks("`-t proc-mem`", blocks, len(chips), chip_id)
    npu = _resolve_npu_id(blocks.npu_id, npu_id)
    return tuple(
        ProcMemEntry(npu_id=npu, chip_id=chip, pid=int(match.group(1)),
                     name=match.group(2).strip(), memory_mb=_int(match.group(3)))
        for chip, block in chips
        for line in block
        if (match := _PROC_RE.search(line.raw)) is not None
    )
