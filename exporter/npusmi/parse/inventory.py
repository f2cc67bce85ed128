"""Parsers for npu-smi's identity outputs: `info -m` (logic and physical ids of every chip)
and `-t board [-c]` (product, serials and the die id)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from exporter.npusmi.parse.errors import check_output
from exporter.npusmi.parse.keyvalue import (
    NPU_ID,
    Line,
    apply_spec,
    garbled,
    int_value,
    key_spec,
    norm,
    read_output,
    resolve_npu_id,
    str_value,
)
from exporter.npusmi.parse.records import BoardInfo, ChipMapEntry, NpuSmiError

# --- npu-smi info -m ---------------------------------------------------------------------

# Header names -> ChipMapEntry fields. A3 adds "Chip Phy-ID"; 950 has "Slot ID" and no logic id.
_MAP_COLUMNS = {
    "npu id": "npu_id",
    "chip id": "chip_id",
    "chip logic id": "logic_id",
    "chip phy-id": "phy_id",
    "slot id": "slot_id",
    "chip name": "chip_name",
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
        raise garbled("`info -m`")
    columns = _map_columns(rows[start])
    if "npu id" not in columns or "chip id" not in columns:
        raise garbled("`info -m`")
    entries = []
    for row in rows[start + 1 :]:
        # Every column but the last is one token; the last (Chip Name) may hold a space.
        cells = dict(zip(columns, row.split(None, len(columns) - 1)))
        if len(cells) < len(columns):
            continue
        npu_id, chip_id = int_value(cells["npu id"]), int_value(cells["chip id"])
        if npu_id is None or chip_id is None:
            continue
        entries.append(
            ChipMapEntry(
                npu_id=npu_id,
                chip_id=chip_id,
                logic_id=int_value(cells.get("chip logic id", "")),
                chip_name=" ".join(cells.get("chip name", "").split()),
                phy_id=int_value(cells.get("chip phy-id", "")),
                slot_id=int_value(cells.get("slot id", "")),
            )
        )
    if not entries:
        raise NpuSmiError("truncated", "`info -m` output has a header but no rows")
    return tuple(entries)


# --- -t board [-c] -----------------------------------------------------------------------

_BOARD_SPEC = key_spec(
    ("chip_id", int_value, ["Chip ID"]),
    ("product_name", str_value, ["Product Name"]),
    ("model", str_value, ["Model"]),
    ("serial_number", str_value, ["Serial Number"]),
    ("software_version", str_value, ["Software Version"]),
    ("firmware_version", str_value, ["Firmware Version"]),
    ("chip_name", str_value, ["Chip Name"]),
    ("pcie_bus_info", str_value, ["PCIe Bus Info"]),
    ("chip_count", int_value, ["Chip Count"]),
)
# The die serial: "VDie ID" on the 910 family, "Die ID" elsewhere (310/310B prefix it with
# the chip version, "V100, 0A0B..."), "DDie ID" on 950.
_DIE_KEYS = tuple(norm(k) for k in ("VDie ID", "Die ID", "DDie ID"))
_BOARD_KEYS = frozenset((*_BOARD_SPEC, *_DIE_KEYS))  # with NPU ID, what tells a board output (Chip ID and Count are in the spec)


def _die_id(lines: Sequence[Line]) -> str | None:
    for key in _DIE_KEYS:
        value = next((line.value for line in lines if line.key == key), None)
        if value is not None and (die := str_value(value.rpartition(",")[2])) is not None:
            return die
    return None


def parse_board(text: str, *, npu_id: int | None = None) -> BoardInfo:
    """`npu-smi info -t board -i N` (card) or `... -c C` (chip; chip_id set)."""
    lines = read_output(text, "`-t board`", _BOARD_KEYS)
    printed_npu = next((int_value(line.value) for line in lines if line.key == NPU_ID), None)
    return BoardInfo(
        npu_id=resolve_npu_id(printed_npu, npu_id),
        vdie_id=_die_id(lines),
        fields=tuple((line.label, line.value) for line in lines if line.key is not None),
        **apply_spec(lines, _BOARD_SPEC),
    )
