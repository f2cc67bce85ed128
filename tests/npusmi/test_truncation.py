"""Cut npu-smi output is NpuSmiError('truncated'), never a smaller table; only the process
section may be lost on its own.

Every real sample is cut at every line boundary and inside its lines: a cut in the device table
raises NpuSmiError or reads exactly like the whole sample; a cut after every chip row is whole
(the process section missing where npu-smi always prints it, or cut) returns every chip with
``processes=None`` and ``process_error`` set. Where npu-smi prints no end marker a cut can not
be seen; those places, and the captures that forced an exception to a rule, are named in the
tests that allow them (see also the docstrings of table.py and keyvalue.py).
"""

from __future__ import annotations

import pytest

from exporter.npusmi.parse.details import (
    parse_common,
    parse_ecc,
    parse_health,
    parse_memory,
    parse_usages,
)
from exporter.npusmi.parse.records import ChipUsages, InfoTable, NpuSmiError
from exporter.npusmi.parse.table import parse_info
from exporter.simulator import render
from exporter.simulator.models import MODELS
from exporter.simulator.scenarios import simulate
from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES
INFO = sorted(path.stem for path in FIXTURES.glob("info__*.txt"))
PARTIAL = [name for name in INFO if name.endswith("__partial")]


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def lines_of(name: str) -> list[str]:
    return load(name).splitlines(keepends=True)


def parse_as_collected(text: str, name: str) -> InfoTable:
    """Author-trimmed excerpts are parsed as such; the 310 one also lacks its version line."""
    return parse_info(text, partial=name in PARTIAL, require_version="__310__" not in name)


def truncated(parser, text: str, **options) -> NpuSmiError:
    with pytest.raises(NpuSmiError) as caught:
        parser(text, **options)
    assert caught.value.reason == "truncated", caught.value
    return caught.value


def process_cut(text: str, full: InfoTable | None = None, **options) -> InfoTable:
    """The table of a cut that lost only the processes: every chip, processes unknown."""
    table = parse_info(text, **options)
    assert table.process_error is not None and table.processes is None and table.idle_npus == (), table
    if full is not None:
        assert table.chips == full.chips
    return table


def first_process_line(name: str) -> int | None:
    """The index of the process section's first row (header or idle row), None without one."""
    return next((i for i, line in enumerate(lines_of(name)) if "Process id" in line or "No running processes" in line), None)


def cut_after(name: str, predicate, nth: int = 1) -> str:
    """The sample up to and including the nth line matching ``predicate``."""
    found = 0
    lines = lines_of(name)
    for index, line in enumerate(lines):
        if predicate(line.strip()):
            found += 1
            if found == nth:
                return "".join(lines[: index + 1])
    raise AssertionError(f"no line #{nth} in {name}")


# --- npu-smi info: the collection -------------------------------------------------------------

# Complete tables without a process section: npu-smi prints nothing after their last NPU block,
# so a cut at an NPU border (310 cards: also at the border between two chips) reads as a smaller
# table. 20.x/21.x print no process section; 310/310P tables print it only on some boards and
# four of the seven 310P captures were trimmed before it; info__910-1stgen-Name910B__24.1.0__1
# (first-generation 910) was trimmed before it by its author.
WITHOUT_PROCESS_SECTION = {
    "info__310-Atlas300I-x5__20.2.2__1",
    "info__310B4__23.0.0__1",
    "info__310P3-vnpu-vir01__22.0.4__1",
    "info__310P3__22.0.0-drv22.0.2__1",
    "info__310P3__22.0.2-drv22.0.4__1",
    "info__310P3__22.0.4__1",
    "info__310P3__25.2.3__1",
    "info__910-1stgen-Name910B__24.1.0__1",
    "info__910A__21.0.2__1",
    "info__910A__21.0.4__1",
}


# Tables whose family may lack the process section, so a cut anywhere before it (at an NPU
# border; on 310 cards also between two chips) reads as a smaller table: the above, the 310P
# captures that do print one, and the 910 documentation table whose chips are named "xxx".
NO_END_MARKER = WITHOUT_PROCESS_SECTION | {
    "info__310P3-300IDuo__24.1.rc2__1",
    "info__310P3-300IDuo__25.5.2__1",
    "info__310P3__23.0.0__1",
    "info__910-doc-anon__23.0.rc3-drv23.0.rc2.3__1__mangled",
}


@pytest.mark.parametrize("name", [n for n in INFO if n not in PARTIAL])
def test_every_verbatim_and_mangled_table_parses_as_a_whole_output(name: str) -> None:
    table = parse_info(load(name))
    assert table.chips
    assert (table.processes is None) == (name in WITHOUT_PROCESS_SECTION)


@pytest.mark.parametrize("name", PARTIAL)
def test_author_trimmed_excerpts_read_as_cut_output_unless_parsed_as_partial(name: str) -> None:
    # Trimmed on a line boundary, each is exactly what a cut npu-smi leaves (see its .src).
    excerpt = parse_as_collected(load(name), name)
    if "__310__" in name:  # no version line: garbled by default, an excerpt without it
        with pytest.raises(NpuSmiError):
            parse_info(load(name))
    else:
        try:
            table = parse_info(load(name))
        except NpuSmiError as error:
            assert error.reason == "truncated", error
        else:  # trimmed after the device table: every chip, the processes unknown
            assert process_cut(load(name)).chips == excerpt.chips and table.process_error
    assert excerpt.chips


@pytest.mark.parametrize("name", INFO)
def test_info_cut_at_every_line_boundary(name: str) -> None:
    full = parse_as_collected(load(name), name)
    lines = lines_of(name)
    for end in range(len(lines)):
        try:
            table = parse_as_collected("".join(lines[:end]), name)
        except NpuSmiError as error:
            assert error.reason in ("garbled", "truncated"), (end, error)
            continue
        if table == full:
            continue
        if table.process_error is not None:
            # Every chip row before the cut is whole: all chips, or (cut exactly on an NPU border
            # where a process section is required) those before it; processes unknown.
            assert table.processes is None and table.idle_npus == (), end
            assert full.chips[: len(table.chips)] == table.chips and table.chips, end
            assert len(table.chips) == len(full.chips) or "before the process section" in table.process_error, end
            continue
        # Only where no end marker exists may a cut read as a smaller table; excerpts are read
        # without the completeness rules, so any of their cuts can.
        assert name in NO_END_MARKER or name in PARTIAL, (end, lines[end - 1])
        assert table.processes is None or name in PARTIAL, end
        assert full.chips[: len(table.chips)] == table.chips, end


def _cut_positions(content: str) -> set[int]:
    """Inside a line: after its first character, mid-way, before the last, after each '+' or '|'."""
    inner = {1, len(content) // 2, len(content) - 1}
    inner |= {i + 1 for i, char in enumerate(content) if char in "+|"}
    return {i for i in inner if 0 < i < len(content)}


@pytest.mark.parametrize("name", INFO)
def test_info_cut_inside_any_table_line_is_truncated(name: str) -> None:
    """Inside a line of the device table: truncated. Inside a line of the process section
    (after its "+---" top border): every chip, processes unknown."""
    lines = lines_of(name)
    version = next((i for i, line in enumerate(lines) if "Version:" in line), 0)
    first = first_process_line(name)
    processes_from = first if first is not None and "=" not in lines[first - 1] else len(lines)
    full = parse_as_collected(load(name), name)
    for index in range(version + 1, len(lines)):
        raw = lines[index]
        content = raw.strip()
        if not content.startswith(("|", "+")):
            continue
        lead = len(raw) - len(raw.lstrip())
        for position in sorted(_cut_positions(content)):
            text = "".join(lines[:index]) + raw[: lead + position]
            if index >= processes_from:
                process_cut(text, full, partial=name in PARTIAL, require_version="__310__" not in name)
            else:
                truncated(parse_as_collected, text, name=name)


# --- npu-smi info: one test per rule ------------------------------------------------------------


def _is_border(line: str) -> bool:
    return line.startswith("+")


def _process_header(line: str) -> bool:
    return "Process id" in line


@pytest.mark.parametrize(
    "name",
    [
        "info__910B3__25.5.1__1",
        "info__910B2__23.0.7__1",
        "info__910_93-A3__25.2.0__1",
        "info__950PR__25.7.rc1__1",
    ],
)
def test_a2_a3_950_table_cut_before_its_process_section(name: str) -> None:
    # (a) everything up to the device table's closing "+===", and also its next border: every
    # chip, the process section (always printed on these) unknown.
    header = next(i for i, line in enumerate(lines_of(name)) if _process_header(line))
    for end in (header - 1, header):
        table = process_cut("".join(lines_of(name)[:end]), parse_info(load(name)))
        assert table.process_error == "output ends before the process section"


def test_310p_table_cut_before_its_process_section_is_not_detectable() -> None:
    # The reported limit: it reads like info__310P3__25.2.3__1, which its author trimmed there.
    name = "info__310P3-300IDuo__24.1.rc2__1"
    header = next(i for i, line in enumerate(lines_of(name)) if _process_header(line))
    table = parse_info("".join(lines_of(name)[: header - 1]))
    assert len(table.chips) == 2 and table.processes is None


@pytest.mark.parametrize(
    ("name", "end", "last"),
    [
        ("info__910B3__25.5.1__1", 11, "| 0 "),  # NPU 1's second row
        ("info__910B3__25.5.1__1", 29, "| 0 "),  # NPU 7's second row, the last chip
        ("info__910_93-A3__25.2.0__1", 9, "+-----"),  # the full-width separator between two dies
    ],
)
def test_npu_block_cut_before_its_closing_border(name: str, end: int, last: str) -> None:
    text = "".join(lines_of(name)[:end])
    assert text.splitlines()[-1].startswith(last)
    truncated(parse_info, text)


@pytest.mark.parametrize("npus_listed", range(1, 8))
def test_process_section_cut_after_a_complete_npu_group(npus_listed: int) -> None:
    # (b) the groups are closed by "+===": an NPU of the device table is missing.
    name = "info__910B3__25.5.1__1"
    header = next(i for i, line in enumerate(lines_of(name)) if _process_header(line))
    text = "".join(lines_of(name)[: header + 2 + 2 * npus_listed])
    assert text.rstrip().endswith("=+")
    table = process_cut(text, parse_info(load(name)))
    assert table.process_error == f"process section ends before NPU {npus_listed}"


@pytest.mark.parametrize("name", ["info__910_93-A3__25.2.0__1", "info__950PR__25.7.rc1__1", "info__910B2C__23.0.2.1__1"])
def test_process_section_cut_after_a_process_row(name: str) -> None:
    lines = lines_of(name)
    header = next(i for i, line in enumerate(lines) if _process_header(line))
    row = next(i for i in range(header + 1, len(lines)) if lines[i].startswith("|") and "No running processes" not in lines[i])
    table = process_cut("".join(lines[: row + 1]), parse_info(load(name)))
    assert "after a process row" in table.process_error


def test_process_section_cut_after_its_header() -> None:
    name = "info__950PR__25.7.rc1__1"  # 950 V2 lists only busy NPUs: the rows themselves are required
    full = parse_info(load(name))
    process_cut(cut_after(name, _process_header), full)
    process_cut(cut_after(name, _is_border, nth=sum(map(_is_border, map(str.strip, lines_of(name)))) - 1), full)


def test_cut_inside_a_separator_line() -> None:
    # (c) the last line is a prefix of a border: the process section's last one here.
    text = load("info__910B3__25.5.1__1").rstrip("\n")
    for keep in (1, 20, 28, 29, 50, len(text.rsplit("\n", 1)[1]) - 1):
        cut = text.rsplit("\n", 1)[0] + "\n" + text.rsplit("\n", 1)[1][:keep]
        table = process_cut(cut, parse_info(load("info__910B3__25.5.1__1")))
        assert "border" in table.process_error
    # The closing border of the last NPU block of the device table: truncated.
    lines = lines_of("info__910B3__25.5.1__1")
    for keep in (1, 20, 50):
        error = truncated(parse_info, "".join(lines[:29]) + lines[29][:keep])
        assert "border" in error.message


def test_empty_device_table_is_truncated() -> None:
    truncated(parse_info, cut_after("info__910B3__25.5.1__1", _is_border, nth=3))


def test_910b2c_edited_closing_border_is_the_one_coverage_exception() -> None:
    # Its author trimmed it to 2 NPUs and closed the process section with "+---", which npu-smi
    # never prints there; with npu-smi's own "+===" the missing NPU 1 is a cut.
    text = load("info__910B2C__23.0.2.1__1")
    assert [p.npu_id for p in parse_info(text).processes] == [0]
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    edited = text.replace(last, last.replace("-", "="))
    assert process_cut(edited, parse_info(text)).process_error == "process section ends before NPU 1"


def test_950_v2_process_section_lists_only_busy_npus() -> None:
    table = parse_info(load("info__950PR__25.7.rc1__1"))  # verbatim: NPUs 1 and 2 are not listed
    assert [c.npu_id for c in table.chips] == [0, 1, 2]
    assert {p.npu_id for p in table.processes} == {0} and table.idle_npus == ()


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("scenario", ["healthy", "idle"])
def test_simulated_tables_cut_at_every_line(model: str, scenario: str) -> None:
    text = render.render_info(simulate(MODELS[model], scenario, 1_780_000_000.0))
    full = parse_info(text)
    lines = text.splitlines(keepends=True)
    for end in range(len(lines)):
        try:
            table = parse_info("".join(lines[:end]))
        except NpuSmiError:
            continue
        assert table.chips == full.chips[: len(table.chips)] and table.processes is None, end
        if table.process_error is None:
            # The 310P limit above: cut before the process section, at a card's or a chip's border.
            assert model == "310p-duo" and lines[end - 1].startswith("+"), end
        else:
            assert len(table.chips) == len(full.chips) or "before the process section" in table.process_error, end


# --- -t <type>: fewer chip blocks than "Chip Count" -----------------------------------------------

KEYVALUE = {"usages": parse_usages, "common": parse_common, "memory": parse_memory, "ecc": parse_ecc, "health": parse_health}
# Card answers: every per-chip sample that prints its Chip Count line.
CARD_ANSWERS = sorted(
    path.stem
    for path in FIXTURES.glob("info-t-*.txt")
    if path.stem.split("__")[0].removeprefix("info-t-") in KEYVALUE and "Chip Count" in path.read_text()
)


def _parser(name: str):
    return KEYVALUE[name.split("__")[0].removeprefix("info-t-")]


def _first_block(text: str) -> str:
    """The text up to its first block closed by a Chip ID line (the lone-block case)."""
    lines = text.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.strip().startswith("Chip ID"))
    return "".join(lines[: end + 1])


def _allowed_short_read(name: str, prefix: str, result, full) -> bool:
    """The documented places without an end marker (keyvalue.py docstring)."""
    if name.startswith("info-t-common"):
        # Chip ID opens a block and nothing closes the last one or the MCU block: no chip lost.
        return [c.chip_id for c in result.chips] == [c.chip_id for c in full.chips]
    # One complete block and nothing after it: the simulator's `-c` answer reads the same.
    return prefix.rstrip() == _first_block(prefix).rstrip()


@pytest.mark.parametrize("name", CARD_ANSWERS)
def test_keyvalue_cut_at_every_line_boundary(name: str) -> None:
    parser, text = _parser(name), load(name)
    full = parser(text, npu_id=0)
    lines = text.splitlines(keepends=True)
    for end in range(len(lines)):
        prefix = "".join(lines[:end])
        try:
            result = parser(prefix, npu_id=0)
        except NpuSmiError as error:
            assert error.reason in ("garbled", "truncated"), (end, error)
            continue
        assert result == full or _allowed_short_read(name, prefix, result, full), (end, lines[end - 1])


@pytest.mark.parametrize("name", ["info-t-usages__310P-300IDuo__unknown__1"])
def test_second_block_cut_is_truncated(name: str) -> None:
    text = load(name)
    first = _first_block(text)
    for keep in range(1, 3):  # the blank line, then the first line of chip 1's block
        cut = "".join(text.splitlines(keepends=True)[: first.count("\n") + keep + 1])
        if cut.rstrip() != first.rstrip():
            error = truncated(_parser(name), cut)
            assert "1 complete chip block(s) of the 2" in error.message


def test_common_second_chip_missing_is_truncated() -> None:
    text = load("info-t-common__310P-300IDuo__unknown__1")
    cut = text[: text.index("Chip ID                        : 1")]
    truncated(parse_common, cut)
    truncated(parse_common, cut + "Chip ID                        : 1\n")  # a block opened, nothing in it
    assert [c.chip_id for c in parse_common(cut, chip_id=0).chips] == [0]  # `-c 0`


def test_single_chip_card_cut_before_its_chip_id_is_truncated() -> None:
    # Without its Chip ID line the block is not chip 0: only 950 V2 prints neither Chip Count nor ID.
    text = load("info-t-usages__910B3__25.5.1__1")
    truncated(parse_usages, text[: text.index("\tChip ID")])


def test_query_for_one_chip_may_print_fewer_blocks() -> None:
    text = load("info-t-usages__310P-300IDuo__unknown__1")
    cut = text[: text.rindex("Chip ID")]
    assert [u.chip_id for u in parse_usages(cut, chip_id=0)] == [0]
    # npu-smi's own `-c 1` answer prints the fields only: the chip is the one queried.
    fields = "\tAicore Usage Rate(%)           : 41\n"
    assert parse_usages(fields, npu_id=3, chip_id=1) == (ChipUsages(3, 1, aicore_percent=41.0),)
    assert parse_usages(fields, npu_id=3) == (ChipUsages(3, 0, aicore_percent=41.0),)  # 950 V2: one chip, chip 0


def test_one_complete_block_and_nothing_after_it_is_accepted() -> None:
    # The documented gap: the simulator's `-c 0` answer and a card answer cut right after chip 0.
    text = _first_block(load("info-t-usages__310P-300IDuo__unknown__1"))
    assert [u.chip_id for u in parse_usages(text)] == [0]


def test_mcu_block_after_fewer_blocks_is_not_a_cut() -> None:
    # show_ascend_card_info skips a chip that does not support the type, then prints the MCU.
    text = "NPU ID : 5\nChip Count : 2\n\nAicore Usage Rate(%) : 44\nChip ID : 0\n\nChip Name : MCU\n"
    assert parse_usages(text) == (ChipUsages(5, 0, aicore_percent=44.0),)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("kind", sorted(KEYVALUE))
def test_simulated_card_answers_cut_at_every_line(model: str, kind: str) -> None:
    state = simulate(MODELS[model], "healthy", 1_780_000_000.0)
    npu_id = state.npu_ids[-1]
    parser, text = KEYVALUE[kind], render.RENDERERS[kind](state, npu_id)
    full = parser(text, npu_id=npu_id)
    lines = text.splitlines(keepends=True)
    for end in range(len(lines)):
        prefix = "".join(lines[:end])
        try:
            result = parser(prefix, npu_id=npu_id)
        except NpuSmiError:
            continue
        name = f"info-t-{kind}"
        assert result == full or _allowed_short_read(name, prefix, result, full), (end, lines[end - 1])
    # A query for one chip: the simulator prints one block under the card's Chip Count.
    for chip in state.chips_of(npu_id):
        single = render.RENDERERS[kind](state, npu_id, chip.chip_id)
        parsed = parser(single, npu_id=npu_id, chip_id=chip.chip_id)
        ids = [record.chip_id for record in (parsed.chips if kind == "common" else parsed)]
        assert ids and set(ids) <= {chip.chip_id}
