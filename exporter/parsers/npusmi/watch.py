"""Parser for `npu-smi info watch` (streaming, one header then rows).

The header names contain spaces ("AI Core(%)") and the cells are `%-12s` (newer columns
` %-12s`), so columns are found by matching names in the header line, never by offset; data
cells never contain spaces, so a data row is split on whitespace and matched by position.
"""

from __future__ import annotations

import re

from exporter.parsers.npusmi.errors import check_output, detect_error
from exporter.parsers.npusmi.records import NpuSmiError, WatchRow
from exporter.parsers.npusmi.table import to_float, to_int

# Header name -> WatchRow field (FORMATS.md §3). The id columns are handled separately.
_VALUE_COLUMNS = {
    "Pwr(W)": "power_watts",
    "Temp(C)": "temperature_celsius",
    "AI Core(%)": "aicore_percent",
    "AI Cpu(%)": "aicpu_percent",
    "Ctrl Cpu(%)": "ctrlcpu_percent",
    "Memory(%)": "memory_percent",
    "Memory BW(%)": "memory_bandwidth_percent",
    "NPU Util(%)": "npu_util_percent",
    "AI Cube(%)": "aicube_percent",
}
_NPU, _CHIP = "NpuID(Idx)", "ChipId(Idx)"
_KNOWN = sorted((_NPU, _CHIP, *_VALUE_COLUMNS), key=len, reverse=True)
# Known names first; then any other "<words>(<unit>)", so a column added by a newer build is
# still counted (and ignored) instead of shifting every later value.
_HEADER_RE = re.compile("|".join(map(re.escape, _KNOWN)) + r"|[^\s()][^()]*?\([^()\s]*\)")
_DATA_RE = re.compile(r"[0-9]+(?:\s|$)")  # a data row starts with the NPU id


def _header_columns(line: str) -> tuple[str, ...]:
    columns: list[str] = []
    end = 0
    for match in _HEADER_RE.finditer(line):
        if line[end:match.start()].strip():
            raise NpuSmiError("garbled", f"unknown text in watch header {line.strip()!r}")
        columns.append(match.group(0))
        end = match.end()
    if line[end:].strip() or not columns or columns[0] != _NPU:
        raise NpuSmiError("garbled", f"unreadable watch header {line.strip()!r}")
    return tuple(columns)


class WatchParser:
    """Feed lines as they arrive; header lines set the columns, data lines give a WatchRow."""

    def __init__(self) -> None:
        self._columns: tuple[str, ...] | None = None

    @property
    def columns(self) -> tuple[str, ...] | None:
        """The header names of the current stream, or None before its header line."""
        return self._columns

    def feed(self, line: str) -> WatchRow | None:
        error = detect_error(line)
        if error is not None:
            raise error
        text = line.strip()
        if text.startswith(_NPU):
            # Set again on every header: a restarted npu-smi may print other columns (-s).
            self._columns = _header_columns(text)
            return None
        if not _DATA_RE.match(text):
            # Blank lines, shell prompts, "DrvMngGetConsoleLogLevel failed" (the dcmi error
            # follows on the next line) and warnings carry no sample.
            return None
        if self._columns is None:
            raise NpuSmiError("garbled", f"watch data row before the header: {text!r}")
        return self._row(text.split())

    def _row(self, cells: list[str]) -> WatchRow:
        columns = self._columns or ()
        if len(cells) != len(columns):
            reason = "truncated" if len(cells) < len(columns) else "garbled"
            raise NpuSmiError(reason, f"watch row has {len(cells)} cells for {len(columns)} columns")
        values = dict(zip(columns, cells))
        npu_id = to_int(values[_NPU])
        chip_id = to_int(values[_CHIP]) if _CHIP in values else None
        if npu_id is None or (_CHIP in values and chip_id is None):
            raise NpuSmiError("garbled", f"unreadable ids in watch row {' '.join(cells)!r}")
        fields = {field: to_float(values.get(name)) for name, field in _VALUE_COLUMNS.items()}
        return WatchRow(npu_id=npu_id, chip_id=chip_id, **fields)


def parse_watch(text: str) -> tuple[WatchRow, ...]:
    """All rows of a captured watch stream. Raises NpuSmiError when no header was printed."""
    check_output(text)
    parser = WatchParser()
    rows = tuple(row for row in map(parser.feed, text.splitlines()) if row is not None)
    if parser.columns is None:
        raise NpuSmiError("garbled", "no 'NpuID(Idx)' watch header")
    return rows
