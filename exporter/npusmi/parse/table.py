"""Parser for the `npu-smi info` overview table (device rows and process section).

The table has been 80, 86, 93, 94, 98, 106, 116 and 99 characters wide (docs/formats/npu-smi.md, "Layout families and widths"), so
nothing here uses character offsets: each row is split on ``|`` into cells, and the values of
a cell are matched to the header names printed in the same cell of the section's header rows.

Decisions (see also the tests):
- A text without the ``| npu-smi X   Version: Y |`` line is a scrape failure (``garbled``),
  as an error output is not a table (docs/formats/npu-smi.md, "Errors and DCMI return codes"); ``require_version=False`` accepts author-trimmed excerpts.
- Identity values (NPU id, chip id, pid) that do not read as integers raise ``garbled``:
  the row's values could not be attributed to a chip. Any other unreadable value is None.
- A chip cut between its two rows raises ``truncated`` (the output was cut, and a silently
  dropped chip would read as a missing NPU).
- A text cut on a line boundary after complete rows also raises ``truncated``. The rules
  follow npu-smi's printer (print_total_info*; docs/formats/npu-smi.md, "Cut outputs") and were checked against
  every collected capture; the captures that forced an exception are named where it is made:
  - the output ends with a border, never with a row: each NPU block of the device table ends
    with ``+===`` and so does the process section (after each NPU's rows on the NPU/Chip
    layout, after the last row on 950 V2);
  - a border or row cut mid-line is truncation: a last border shorter than the table's other
    borders (or not ending in ``+``), a last row narrower than the borders or with fewer cells
    than the row above it;
  - on the NPU/Chip layout (every family but 950) every NPU of the device table appears in the
    process section, with rows or "No running processes found in NPU n";
  - the process section is required on Atlas A2 (910B1-4, 910B2C), A3 (Phy-ID column) and 950
    tables from 22.x on. It may be absent on 20.x/21.x tables, 310/310P/310B tables (printed
    only on some boards; never in vNPU containers) and first-generation 910.
  ``partial=True`` (and ``require_version=False`` on a text without the version line) reads an
  excerpt its author trimmed on a line boundary: the rules on how a whole output ends are
  skipped, a line cut in the middle is still ``truncated``.
- Only the chips are withheld for a cut inside the device table. When every chip's rows are
  whole (the last NPU block closed by its ``+===``) and the process section is missing where it
  is required, or cut anywhere (after its top border, mid-line, before its closing border, before
  an NPU's group), the table is returned with ``processes=None`` and ``process_error`` saying
  why: the chips are served, their processes are unknown (not zero), and the source counts the
  cut as ``truncated`` for the process part. A cut exactly on an NPU border of the device table
  reads the same way (nothing tells it from a table without a process section): the NPUs after
  it are not listed, so they read as not read (``npu_up 0``), not as idle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.core.text import table_cells
from exporter.core.values import is_placeholder, to_float, to_int
from exporter.npusmi.parse.errors import check_output
from exporter.npusmi.parse.records import InfoChip, InfoProcess, InfoTable, NpuSmiError

# One header cell's names: a cell holds one or more names, most of them single words; these
# few contain a space. Longest alternatives first so "Process id" does not eat "... in container".
_HEADER_NAME_RE = re.compile(r"Process id in container|Process id|Process name|Process memory\(MB\)|NPU ID|NPU Util\(%\)|\S+")
_VERSION_RE = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_BORDER_RE = re.compile(r"\+[-=+]*")  # also a border cut short at the end of the output
_IDLE_RE = re.compile(r"No running processes found in NPU\s+(\S+)")
_PAIR_SEP_RE = re.compile(r"\s*/\s*")  # "29954/ 65536", "0    / 0" -> "29954/65536", "0/0"
_DRIVER_WARNING = "The driver package may not be completely installed"
_A2_NAME_RE = re.compile(r"910B[0-9]")  # Atlas A2: 910B1-4, 910B2C (first-gen 910 prints plain "910B")

Header = tuple[tuple[str, ...], ...]  # per cell, the header names printed in it
Values = dict[str, str | None]


def _pair(value: str | None) -> tuple[int | None, int | None]:
    """`used/total` (already joined by _values) -> (used, total)."""
    if value is None or "/" not in value:
        return None, None
    used, total = value.split("/", 1)
    return to_int(used), to_int(total)


def _header(cells: list[str]) -> Header:
    return tuple(tuple(_HEADER_NAME_RE.findall(cell)) for cell in cells)


def _values(header: Header, cells: list[str]) -> Values | None:
    """Each header name -> its value in this row; None when the row's cells do not fit."""
    if len(cells) != len(header):
        return None
    values: Values = {}
    for names, cell in zip(header, cells):
        if len(names) == 1:
            # A cell with one column holds one value, which may contain spaces (process names).
            values[names[0]] = cell.strip() or None
        elif names:
            tokens: list[str | None] = list(_PAIR_SEP_RE.sub("/", cell).split())
            if len(tokens) != len(names):
                tokens = [None] * len(names)  # cannot tell which value is missing
            values.update(zip(names, tokens))
    return values


def _text(value: str | None) -> str | None:
    return None if value is None or is_placeholder(value) else value


def _first(values: Values, *names: str) -> str | None:
    return next((values[name] for name in names if values.get(name) is not None), None)


def _identity(value: str | None, what: str, row: list[str]) -> int:
    number = to_int(value)
    if number is None or number < 0:
        raise NpuSmiError("garbled", f"unreadable {what} {value!r} in row {'|'.join(row)!r}")
    return number


def _has(header: Header, name: str) -> bool:
    return any(name in names for names in header)


def _is_device_header(header: Header) -> bool:
    return bool(header and header[0] and header[0][0] in ("NPU", "NPU ID") and _has(header, "Health"))


def _is_process_header(header: Header) -> bool:
    return bool(header and header[0] and header[0][0] in ("NPU", "NPU ID") and _has(header, "Process id"))


def _chip(head1: Header, head2: Header, row1: list[str], row2: list[str]) -> InfoChip:
    v1, v2 = _values(head1, row1), _values(head2, row2)
    if v1 is None or v2 is None:
        raise NpuSmiError("garbled", f"chip rows do not match the header: {'|'.join(row1)!r}")
    hugepages = _pair(v1.get("Hugepages-Usage(page)"))
    memory = _pair(v2.get("Memory-Usage(MB)"))
    hbm = _pair(v2.get("HBM-Usage(MB)"))
    return InfoChip(
        npu_id=_identity(_first(v1, "NPU", "NPU ID"), "NPU id", row1),
        # 950 V2 prints no chip cell: one chip per NPU.
        chip_id=_identity(v2.get("Chip"), "chip id", row2) if _has(head2, "Chip") else 0,
        name=v1.get("Name") or "",
        health=_text(v1.get("Health")),
        power_watts=to_float(v1.get("Power(W)")),
        temperature_celsius=to_float(v1.get("Temp(C)")),
        hugepages_used=hugepages[0],
        hugepages_total=hugepages[1],
        bus_id=_text(v2.get("Bus-Id")),
        aicore_percent=to_float(v2.get("AICore(%)")),
        npu_util_percent=to_float(v2.get("NPU Util(%)")),
        memory_used_mb=memory[0],
        memory_total_mb=memory[1],
        hbm_used_mb=hbm[0],
        hbm_total_mb=hbm[1],
        phy_id=to_int(v2.get("Phy-ID")),
        logic_id=to_int(v2.get("Device")),
    )


def _process(header: Header, row: list[str]) -> InfoProcess | int:
    """A process row, or the NPU id of an idle row printed as `| 2 | NA | NA | ...`."""
    values = _values(header, row)
    if values is None:
        raise NpuSmiError("garbled", f"process row does not match the header: {'|'.join(row)!r}")
    npu_id = _identity(_first(values, "NPU", "NPU ID"), "NPU id", row)
    pid = values.get("Process id")
    if pid is None or is_placeholder(pid):
        return npu_id
    return InfoProcess(
        npu_id=npu_id,
        chip_id=_identity(values.get("Chip"), "chip id", row) if _has(header, "Chip") else None,
        pid=_identity(pid, "pid", row),
        name=values.get("Process name") or "",
        memory_mb=to_int(values.get("Process memory(MB)")),
        container_pid=to_int(values.get("Process id in container")),
    )


@dataclass
class _Reader:
    """Walks the table rows after the version line; one section (device or process) at a time."""

    section: str | None = None  # "device" | "process"
    device_header: tuple[Header, Header] | None = None
    pending_header: Header | None = None  # device header row 1, waiting for row 2
    process_header: Header | None = None
    block: list[list[str]] = field(default_factory=list)  # chip rows since the last border
    seen_device_header: bool = False
    chips: list[InfoChip] = field(default_factory=list)
    processes: list[InfoProcess] | None = None
    idle: list[int] = field(default_factory=list)
    chip_border: str | None = None  # the border printed right after the last chip's rows
    process_rows: int = 0  # process and idle rows of the process section
    previous_cells: int = 0  # cell count of the row above the current line
    last_border: str | None = None  # the line above, when it was a border
    process_border: bool = False  # the process section's top border was printed
    process_error: str | None = None  # why the process section is unknown (cut or missing)

    def end_block(self) -> None:
        """A border or a new section: nothing may be left half-read."""
        if self.pending_header is not None:
            raise NpuSmiError("garbled", "device header row 1 without row 2")
        if self.block:
            raise NpuSmiError("garbled", f"chip with one row: {'|'.join(self.block[0])!r}")

    def border(self, line: str) -> None:
        self.end_block()
        if self.section == "device" and self.chips and self.chip_border is None:
            self.chip_border = line
        # The process section opens with a "+---" border right under the last NPU's "+===".
        if self.section == "device" and self.last_border and "=" in self.last_border and "=" not in line:
            self.process_border = True
        self.last_border = line

    @property
    def in_processes(self) -> bool:
        """The device table is over: every chip row before this point is complete."""
        return self.process_border or self.processes is not None

    def cut(self, message: str) -> None:
        """The output ends mid-line: within the process section only the processes are lost."""
        if not self.in_processes:
            raise NpuSmiError("truncated", message)
        self.process_error = message

    def row(self, cells: list[str]) -> None:
        self.previous_cells = len(cells)
        self.last_border = None
        header = _header(cells)
        if self.pending_header is not None:
            self._device_header(self.pending_header, header)
        elif _is_device_header(header):
            self.end_block()
            self.pending_header = header
        elif _is_process_header(header):
            self.end_block()
            self.section, self.process_header = "process", header
            self.processes = self.processes or []
        elif len(cells) == 1 and (idle := _IDLE_RE.search(cells[0])):
            self.end_block()
            self.idle.append(_identity(idle.group(1), "NPU id", cells))
            # 950 V2 excerpts print this row without a process header (info__950PR__25.7.rc1.6).
            self.section = "process"
            self.processes = self.processes or []
            self.process_rows += 1
        elif self.section == "device" and self.device_header is not None:
            self.block.append(cells)
            if len(self.block) == 2:
                self.chips.append(_chip(*self.device_header, *self.block))
                self.block, self.chip_border = [], None
        elif self.section == "process" and self.process_header is not None:
            item = _process(self.process_header, cells)
            if isinstance(item, int):
                self.idle.append(item)
            else:
                assert self.processes is not None
                self.processes.append(item)
            self.process_rows += 1
        else:
            raise NpuSmiError("garbled", f"row outside any table section: {'|'.join(cells)!r}")

    def _device_header(self, row1: Header, row2: Header) -> None:
        if len(row1) != len(row2):
            raise NpuSmiError("garbled", "device header rows have different cell counts")
        self.pending_header = None
        self.section, self.device_header, self.seen_device_header = "device", (row1, row2), True

    def finish(self) -> None:
        if self.pending_header is not None or self.block:
            raise NpuSmiError("truncated", "output ends inside a chip's header or rows")
        if not self.seen_device_header:
            raise NpuSmiError("garbled", "no device table header")

    def check_complete(self, last_line: str, tool_version: str) -> None:
        """A whole output, not one cut on a line boundary (the rules of the module docstring)."""
        assert self.device_header is not None
        if self.processes is None:
            if not self.chips:
                raise NpuSmiError("truncated", "output ends after the device table header")
            border = self.chip_border
            if border is None:
                raise NpuSmiError("truncated", "output ends after a chip's rows, before its border")
            # A card of 310/310P chips separates its chips with a column-break border, which is
            # also the first line of the process section; info__310P3__22.0.4__1 ends with it
            # (its author cut the rest), so on those tables it cannot be told from a cut card.
            if "=" not in border and not (self._ddr_only and border.count("+") > 2):
                raise NpuSmiError("truncated", f"output ends inside an NPU block (last border {border!r})")
            if self._needs_process_section(tool_version):
                self.process_error = "output ends before the process section"
            return
        if not self.process_rows:
            self.process_error = "output ends after the process section header"
            return
        if not _BORDER_RE.fullmatch(last_line):
            self.process_error = "output ends after a process row, before its border"
            return
        # npu-smi closes every NPU's process rows with "+===". info__910B2C__23.0.2.1__1 was
        # trimmed to 2 NPUs by its author and closed with a "+---" line npu-smi never prints
        # there: an edited table, so only a "+===" ending promises every NPU.
        # 950 V2 lists only some NPUs (info__950PR__25.7.rc1__1 lists NPU 0 of 0-2).
        if "=" in last_line and not self._v2:
            listed = {p.npu_id for p in self.processes or ()} | set(self.idle)
            missing = sorted({c.npu_id for c in self.chips} - listed)
            if missing:
                self.process_error = f"process section ends before NPU {missing[0]}"

    @property
    def _v2(self) -> bool:
        """950 layouts: the first column is "NPU ID" (no chip column)."""
        assert self.device_header is not None
        return self.device_header[0][0][0] == "NPU ID"

    @property
    def _ddr_only(self) -> bool:
        """310/310P/310B tables: Memory-Usage (DDR) and no HBM-Usage column."""
        assert self.device_header is not None
        return not _has(self.device_header[1], "HBM-Usage(MB)")

    def _needs_process_section(self, tool_version: str) -> bool:
        """Whether npu-smi always prints the process section after this device table.

        Not on 20.x/21.x (no capture of those shows one), nor on 310/310P/310B tables (printed
        only on card and server boards, never in vNPU containers, and trimmed from four of the
        seven 310P captures), nor on first-generation 910 (info__910-1stgen-Name910B__24.1.0__1
        was trimmed by its author and cannot be told from a cut output).
        """
        major = re.match(r"[0-9]+", tool_version)
        if major is None or int(major.group()) < 22:
            return False
        assert self.device_header is not None
        return self._v2 or _has(self.device_header[1], "Phy-ID") or any(_A2_NAME_RE.match(c.name) for c in self.chips)


def _is_cut_row(line: str, cells: list[str], previous_cells: int, widest: int) -> bool:
    """A last row closed by one of its inner "|": fewer cells than the row above it, or narrower
    than the borders (npu-smi pads rows to the table width; 950 V2 process rows are one short)."""
    idle = len(cells) == 1 and _IDLE_RE.search(cells[0])
    return len(line) < widest - 1 or (len(cells) < previous_cells and not idle)


def parse_info(text: str, *, require_version: bool = True, partial: bool = False) -> InfoTable:
    """Parse `npu-smi info`. Raises only NpuSmiError (npu-smi's own errors, garbled, truncated).

    ``partial=True`` accepts an excerpt its author trimmed on a line boundary (see the module
    docstring); a text without its version line, accepted by ``require_version=False``, is one.
    """
    check_output(text)
    lines = [line.strip() for line in text.splitlines()]
    # Skip anything before the version line: shell prompts, echoed env vars, markdown fences.
    start, versions = next(
        ((i, match) for i, line in enumerate(lines) if line.startswith("|") and (match := _VERSION_RE.search(line))),
        (0, None),
    )
    if versions is None and require_version:
        raise NpuSmiError("garbled", "no 'npu-smi ... Version:' header line")
    # The widest border so far (the top border comes before the version line).
    widest = max((len(line) for line in lines[:start] if _BORDER_RE.fullmatch(line)), default=0)
    if versions is not None:
        start += 1
    reader = _Reader()
    # Other lines (the driver warning, "+ cmd" shell traces, stray notes) are not table lines.
    table_lines = [line for line in lines[start:] if line.startswith("|") or _BORDER_RE.fullmatch(line)]
    for index, line in enumerate(table_lines):
        last = index == len(table_lines) - 1
        if _BORDER_RE.fullmatch(line):
            # A border cut mid-line: npu-smi prints every border of a table at the same width.
            if last and (not line.endswith("+") or len(line) < widest):
                reader.cut(f"output ends inside a border line {line!r}")
                break
            widest = max(widest, len(line))
            reader.border(line)
        elif (cells := table_cells(line)) is not None:
            if last and _is_cut_row(line, cells, reader.previous_cells, widest):
                reader.cut(f"output ends inside a table row {line!r}")
                break
            reader.row(cells)
        elif last:  # a row without its closing "|"
            reader.cut(f"unterminated table line {line!r}")
        else:
            raise NpuSmiError("garbled", f"unterminated table line {line!r}")
    reader.finish()
    if versions is not None and not partial and reader.process_error is None:
        reader.check_complete(table_lines[-1], versions.group(1))
    cut = reader.process_error is not None  # the chips are whole; their processes are unknown
    return InfoTable(
        tool_version=versions.group(1) if versions else None,
        driver_version=versions.group(2) if versions else None,
        chips=tuple(reader.chips),
        processes=None if reader.processes is None or cut else tuple(reader.processes),
        idle_npus=() if cut else tuple(reader.idle),
        driver_warning=_DRIVER_WARNING in text,
        process_error=reader.process_error,
    )
