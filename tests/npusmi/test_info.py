"""`npu-smi info` overview table: one test per fixture, values read by hand from the text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.npusmi.parse.records import InfoChip, InfoProcess, InfoTable, NpuSmiError
from exporter.npusmi.parse.table import parse_info
from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES
INFO_FIXTURES = sorted(path.stem for path in FIXTURES.glob("info__*.txt"))


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def info(name: str) -> InfoTable:
    # Author-trimmed excerpts read as cut outputs unless parsed as such (test_npusmi_truncation.py).
    return parse_info(load(name), partial=name.endswith("__partial"))


def chip(table: InfoTable, npu_id: int, chip_id: int = 0) -> InfoChip:
    (found,) = [c for c in table.chips if (c.npu_id, c.chip_id) == (npu_id, chip_id)]
    return found


# --- 310 / 310B / 310P (DDR only, "Chip  Device" second row) -------------------------------


def test_310_atlas300i_four_chip_cards_20_2_2() -> None:
    table = info("info__310-Atlas300I-x5__20.2.2__1")
    assert (table.tool_version, table.driver_version) == ("20.2.2", "20.2.2")
    assert len(table.chips) == 20
    assert [c.npu_id for c in table.chips] == [n for n in range(2048, 2053) for _ in range(4)]
    assert [c.chip_id for c in table.chips] == [0, 1, 2, 3] * 5
    assert [c.logic_id for c in table.chips] == list(range(20))
    assert table.chips[0] == InfoChip(
        npu_id=2048,
        chip_id=0,
        name="310",
        health="OK",
        power_watts=12.8,
        temperature_celsius=46,
        hugepages_used=None,
        hugepages_total=None,
        bus_id="0000:81:00.0",
        aicore_percent=0,
        npu_util_percent=None,
        memory_used_mb=2621,
        memory_total_mb=8192,
        hbm_used_mb=None,
        hbm_total_mb=None,
        phy_id=None,
        logic_id=0,
    )
    assert chip(table, 2049, 1).temperature_celsius == 50 and chip(table, 2049, 1).bus_id == "0000:86:00.0"
    last = chip(table, 2052, 3)
    assert (last.logic_id, last.temperature_celsius, last.bus_id) == (19, 52, "0000:94:00.0")
    assert table.processes is None and table.idle_npus == () and not table.driver_warning


def test_310b4_soc_bus_id_na_23_0_0() -> None:
    table = info("info__310B4__23.0.0__1")
    assert (table.tool_version, table.driver_version) == ("23.0.0", "23.0.0")
    (only,) = table.chips
    assert (only.npu_id, only.chip_id, only.logic_id, only.name, only.health) == (0, 0, 0, "310B4", "Alarm")
    assert (only.power_watts, only.temperature_celsius) == (0.0, 65)
    assert (only.hugepages_used, only.hugepages_total) == (15, 15)
    assert only.bus_id is None  # printed "NA"
    assert (only.aicore_percent, only.memory_used_mb, only.memory_total_mb) == (0, 3628, 15609)
    assert (only.hbm_used_mb, only.hbm_total_mb) == (None, None)
    assert table.processes is None


def test_310p3_300i_duo_two_chips_24_1_rc2() -> None:
    table = info("info__310P3-300IDuo__24.1.rc2__1")
    assert table.tool_version == "24.1.rc2"
    first, second = table.chips
    assert (first.npu_id, first.chip_id, first.logic_id) == (1792, 0, 0)
    assert (second.npu_id, second.chip_id, second.logic_id) == (1792, 1, 1)
    assert first.power_watts is None and second.power_watts is None  # "NA" on 310P
    assert (first.temperature_celsius, first.hugepages_used, first.hugepages_total) == (36, 0, 0)
    assert (first.memory_used_mb, first.memory_total_mb) == (1821, 44280)
    assert (second.memory_used_mb, second.memory_total_mb) == (1041, 43693)
    assert first.bus_id == second.bus_id == "0000:07:00.0"
    assert first.hbm_used_mb is None
    assert table.processes == () and table.idle_npus == (1792,)


def test_310p3_300i_duo_large_card_id_25_5_2() -> None:
    table = info("info__310P3-300IDuo__25.5.2__1")
    (only,) = table.chips
    assert (only.npu_id, only.name, only.temperature_celsius) == (32896, "310P3", 54)
    assert (only.memory_used_mb, only.memory_total_mb, only.bus_id) == (1904, 44213, "0000:00:00.0")
    assert table.processes == () and table.idle_npus == (32896,)


def test_310p3_vnpu_vir01_after_echo_lines_22_0_4() -> None:
    table = info("info__310P3-vnpu-vir01__22.0.4__1")  # two `echo` lines precede the table
    (only,) = table.chips
    assert (only.npu_id, only.chip_id, only.logic_id, only.name) == (7, 0, 0, "310Pvir01")
    assert (only.power_watts, only.temperature_celsius) == (None, 28)
    assert (only.memory_used_mb, only.memory_total_mb, only.bus_id) == (249, 2690, "0000:00:07.0")
    assert table.processes is None  # vNPU containers print no process section


def test_310p3_tool_and_driver_versions_differ_22_0_0() -> None:
    table = info("info__310P3__22.0.0-drv22.0.2__1")
    assert (table.tool_version, table.driver_version) == ("22.0.0", "22.0.2")
    (only,) = table.chips
    assert (only.npu_id, only.power_watts, only.temperature_celsius) == (0, 16.7, 57)
    assert (only.memory_used_mb, only.memory_total_mb, only.bus_id) == (932, 21534, "0000:5E:00.0")


def test_310p3_card_id_2144_22_0_2() -> None:
    table = info("info__310P3__22.0.2-drv22.0.4__1")
    assert (table.tool_version, table.driver_version) == ("22.0.2", "22.0.4")
    (only,) = table.chips
    assert (only.npu_id, only.power_watts, only.temperature_celsius) == (2144, None, 47)
    assert (only.memory_used_mb, only.memory_total_mb, only.bus_id) == (1807, 21527, "0000:86:00.0")


def test_310p3_hand_spaced_header_22_0_4() -> None:
    # The header row's spacing differs from the data rows: only names count, not positions.
    (only,) = info("info__310P3__22.0.4__1").chips
    assert (only.npu_id, only.temperature_celsius, only.hugepages_used, only.hugepages_total) == (7, 28, 0, 0)
    assert (only.memory_used_mb, only.memory_total_mb, only.bus_id) == (1805, 21527, "0000:00:07.0")


def test_310p3_23_0_0() -> None:
    table = info("info__310P3__23.0.0__1")
    (only,) = table.chips
    assert (only.npu_id, only.temperature_celsius, only.memory_used_mb, only.memory_total_mb) == (24, 29, 1832, 21527)
    assert only.bus_id == "0000:04:00.0"
    assert table.processes == () and table.idle_npus == (24,)


def test_310p3_25_2_3() -> None:
    (only,) = info("info__310P3__25.2.3__1").chips
    assert (only.npu_id, only.temperature_celsius, only.memory_used_mb, only.memory_total_mb) == (224, 71, 1263, 44280)


def test_310_partial_without_version_line() -> None:
    text = load("info__310__unknown__1__partial")
    with pytest.raises(NpuSmiError) as error:
        parse_info(text)  # the scrape-failure rule: no header line
    assert error.value.reason == "garbled"
    table = parse_info(text, require_version=False)
    assert (table.tool_version, table.driver_version) == (None, None)
    first, second = table.chips
    assert (first.npu_id, first.logic_id, first.power_watts, first.temperature_celsius) == (112, 0, 15.8, 42)
    assert (first.memory_used_mb, first.memory_total_mb, first.bus_id) == (2703, 8192, "0000:07:00.0")
    assert (second.npu_id, second.logic_id, second.power_watts, second.temperature_celsius) == (128, 1, 15.4, 43)
    assert (second.memory_used_mb, second.bus_id) == (2621, "0000:08:00.0")


# --- 910 first generation (DDR and HBM) ----------------------------------------------------


def test_910_first_gen_named_910b_24_1_0() -> None:
    table = info("info__910-1stgen-Name910B__24.1.0__1")
    assert len(table.chips) == 8 and {c.name for c in table.chips} == {"910B"}
    first, last = table.chips[0], table.chips[-1]
    assert (first.npu_id, first.chip_id, first.power_watts, first.temperature_celsius) == (0, 0, 70.0, 34)
    assert (first.memory_used_mb, first.memory_total_mb, first.hbm_used_mb, first.hbm_total_mb) == (1197, 13553, 1365, 32768)
    assert first.bus_id == "0000:C1:00.0" and first.logic_id is None and first.phy_id is None
    assert (last.npu_id, last.power_watts, last.temperature_celsius, last.bus_id) == (7, 65.6, 33, "0000:02:00.0")
    assert (last.memory_used_mb, last.memory_total_mb, last.hbm_used_mb) == (1777, 15567, 4)


def test_910a_no_hugepages_column_21_0_2() -> None:
    table = info("info__910A__21.0.2__1")
    first, second = table.chips
    assert (first.npu_id, first.name, first.power_watts, first.temperature_celsius) == (1, "910A", 64.3, 56)
    assert (first.hugepages_used, first.hugepages_total) == (None, None)  # column not printed
    assert (first.memory_used_mb, first.memory_total_mb, first.hbm_used_mb, first.hbm_total_mb) == (1809, 15079, 0, 32768)
    assert first.bus_id == "0000:3B:00.0"
    assert (second.npu_id, second.power_watts, second.temperature_celsius, second.bus_id) == (4, 65.6, 58, "0000:86:00.0")


def test_910a_21_0_4() -> None:
    first, second = info("info__910A__21.0.4__1").chips
    assert (first.npu_id, first.power_watts, first.temperature_celsius) == (0, 70.9, 42)
    assert (first.hugepages_used, first.hugepages_total) == (15, 15)
    assert (first.memory_used_mb, first.memory_total_mb, first.hbm_used_mb, first.hbm_total_mb) == (839, 15170, 1, 32768)
    assert (second.npu_id, second.power_watts, second.memory_used_mb, second.memory_total_mb) == (1, 67.2, 1274, 15171)
    assert second.bus_id == "0000:81:00.0"


# --- 910B (A2) -----------------------------------------------------------------------------


def test_910b1_partial_with_elided_npus_23_0_rc2() -> None:
    table = info("info__910B1__23.0.rc2__1__partial")  # NPUs 2-6 replaced by a "..." line
    assert [c.npu_id for c in table.chips] == [0, 1, 7]
    first, last = table.chips[0], table.chips[-1]
    assert (first.power_watts, first.temperature_celsius, first.hbm_used_mb, first.hbm_total_mb) == (88.4, 46, 4175, 65536)
    assert (first.memory_used_mb, first.memory_total_mb) == (0, 0)
    assert (last.power_watts, last.temperature_celsius, last.hbm_used_mb, last.bus_id) == (92.7, 48, 4174, "0000:42:00.0")
    assert table.processes is None


def test_910b2c_one_process_23_0_2_1() -> None:
    table = info("info__910B2C__23.0.2.1__1")  # every line ends with a space
    first, second = table.chips
    assert (first.npu_id, first.name, first.power_watts, first.temperature_celsius) == (0, "910B2C", 88.6, 51)
    assert (first.hbm_used_mb, first.hbm_total_mb, first.bus_id) == (20701, 65536, "0000:5A:00.0")
    assert (second.npu_id, second.power_watts, second.hbm_used_mb, second.bus_id) == (1, 99.6, 20687, "0000:19:00.0")
    assert table.processes == (InfoProcess(npu_id=0, chip_id=0, pid=124528, name="python3.8", memory_mb=17400),)


def test_910b2_no_running_processes_23_0_7() -> None:
    table = info("info__910B2__23.0.7__1")
    assert len(table.chips) == 8
    assert (chip(table, 0).power_watts, chip(table, 0).hbm_used_mb, chip(table, 0).hbm_total_mb) == (96.5, 29954, 65536)
    assert chip(table, 4).hbm_used_mb == 3347
    assert (chip(table, 7).power_watts, chip(table, 7).temperature_celsius, chip(table, 7).bus_id) == (93.8, 37, "0000:42:00.0")
    assert table.processes == () and table.idle_npus == tuple(range(8))


def test_910b2_processes_25_2_0() -> None:
    table = info("info__910B2__25.2.0__1")
    assert len(table.chips) == 8
    assert (chip(table, 0).power_watts, chip(table, 0).temperature_celsius, chip(table, 0).hbm_used_mb) == (97.8, 36, 60126)
    assert (chip(table, 7).power_watts, chip(table, 7).hbm_used_mb) == (93.1, 60231)
    assert table.processes is not None and len(table.processes) == 8
    assert table.processes[0] == InfoProcess(npu_id=0, chip_id=0, pid=2759218, name="VLLMWorker_DP", memory_mb=56293)
    assert table.processes[-1] == InfoProcess(npu_id=7, chip_id=0, pid=2763344, name="VLLMWorker_DP", memory_mb=56415)
    assert table.idle_npus == ()


def test_910b3_processes_25_5_1() -> None:
    table = info("info__910B3__25.5.1__1")
    assert (table.tool_version, table.driver_version) == ("25.5.1", "25.5.1")
    assert len(table.chips) == 8
    assert table.chips[0] == InfoChip(
        npu_id=0,
        chip_id=0,
        name="910B3",
        health="OK",
        power_watts=99.4,
        temperature_celsius=34,
        hugepages_used=0,
        hugepages_total=0,
        bus_id="0000:C1:00.0",
        aicore_percent=0,
        npu_util_percent=None,
        memory_used_mb=0,
        memory_total_mb=0,
        hbm_used_mb=59189,
        hbm_total_mb=65536,
    )
    last = table.chips[-1]
    assert (last.npu_id, last.power_watts, last.temperature_celsius, last.hbm_used_mb, last.bus_id) == (7, 90.1, 39, 19319, "0000:42:00.0")
    assert table.processes is not None and len(table.processes) == 8
    assert table.processes[0] == InfoProcess(npu_id=0, chip_id=0, pid=3233241, name="VLLMWorker_TP", memory_mb=55844)
    assert table.processes[4] == InfoProcess(npu_id=4, chip_id=0, pid=3232170, name="VLLMEngineCor", memory_mb=56588)
    assert table.processes[-1] == InfoProcess(npu_id=7, chip_id=0, pid=1886762, name="VLLMEngineCor", memory_mb=15975)
    assert not table.driver_warning


def test_910b4_116_wide_five_column_process_header_26_0_rc1() -> None:
    table = info("info__910B4__26.0.rc1__1__partial")  # no closing border after the last row
    (only,) = table.chips
    assert (only.npu_id, only.name, only.power_watts, only.temperature_celsius) == (0, "910B4", 82.6, 32)
    assert (only.memory_used_mb, only.memory_total_mb, only.hbm_used_mb, only.hbm_total_mb) == (0, 0, 2871, 32768)
    assert only.bus_id == "0000:C1:00.0"
    assert table.processes == () and table.idle_npus == (0,)


def test_26x_process_id_in_container_column() -> None:
    # A process row in the 26.x 5-column layout, written into the 26.0.rc1 table in place of
    # its "No running processes" row (no verbatim 26.x sample with a process is collected).
    text = load("info__910B4__26.0.rc1__1__partial").replace(
        "| No running processes found in NPU 0                                                                              |",
        "| 0       0                 | 4017          | python3            | 2048                  | 17                      |",
    )
    table = parse_info(text, partial=True)  # the excerpt has no closing border after that row
    assert table.processes == (InfoProcess(npu_id=0, chip_id=0, pid=4017, name="python3", memory_mb=2048, container_pid=17),)
    assert table.idle_npus == ()


# --- 910_93 (A3): two dies per NPU, "Chip  Phy-ID" -----------------------------------------


def test_a3_two_dies_full_width_separator_25_2_0() -> None:
    table = info("info__910_93-A3__25.2.0__1")
    assert [(c.npu_id, c.chip_id, c.phy_id) for c in table.chips] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert [c.power_watts for c in table.chips] == [162.8, None, 167.1, None]  # "-" on the 2nd die
    assert [c.temperature_celsius for c in table.chips] == [37, 37, 38, 38]
    assert [c.hbm_used_mb for c in table.chips] == [3133, 2876, 3116, 10568]
    assert {c.hbm_total_mb for c in table.chips} == {65536} and {c.name for c in table.chips} == {"Ascend910"}
    assert [c.bus_id for c in table.chips] == ["0000:9C:00.0", "0000:9E:00.0", "0000:37:00.0", "0000:39:00.0"]
    assert table.processes == (InfoProcess(npu_id=1, chip_id=1, pid=990711, name="python", memory_mb=7746),)
    assert table.idle_npus == (0,)


def test_a3_116_wide_cut_after_second_die_26_0_rc2() -> None:
    table = info("info__910_93-A3__26.0.rc2__1__partial")
    die0, die1 = table.chips
    assert (die0.npu_id, die0.chip_id, die0.phy_id, die0.power_watts, die0.temperature_celsius) == (0, 0, 0, 162.6, 34)
    assert (die0.hbm_used_mb, die0.hbm_total_mb, die0.bus_id) == (3419, 65536, "0000:9D:00.0")
    assert (die1.npu_id, die1.chip_id, die1.phy_id, die1.power_watts, die1.temperature_celsius) == (0, 1, 1, None, 34)
    assert (die1.hbm_used_mb, die1.bus_id) == (2874, "0000:9F:00.0")
    assert table.processes is None


def test_a3_five_digit_hbm_touches_slash_26_1_0() -> None:
    table = info("info__910_93-A3__26.1.0.b061__1__partial")
    assert table.tool_version == "26.1.0.b061"
    (only,) = table.chips
    assert (only.npu_id, only.chip_id, only.phy_id, only.power_watts, only.temperature_celsius) == (0, 0, 0, 178.6, 50)
    assert (only.hbm_used_mb, only.hbm_total_mb, only.bus_id) == (15516, 65536, "0000:9D:00.0")


# --- 950 (NPU_SMI_V2): "| NPU ID | Name |", NPU Util instead of AICore ----------------------


def test_950pr_v2_layout_processes_without_separators_25_7_rc1() -> None:
    table = info("info__950PR__25.7.rc1__1")
    assert [(c.npu_id, c.chip_id) for c in table.chips] == [(0, 0), (1, 0), (2, 0)]
    first, second, third = table.chips
    assert first == InfoChip(
        npu_id=0,
        chip_id=0,
        name="Ascend950PR",
        health="Alarm",
        power_watts=205.7,
        temperature_celsius=71,
        hugepages_used=0,
        hugepages_total=0,
        bus_id="0000:71:00.0",
        aicore_percent=None,
        npu_util_percent=100,
        memory_used_mb=0,
        memory_total_mb=0,
        hbm_used_mb=90633,
        hbm_total_mb=114688,
    )
    assert (second.health, second.power_watts, second.temperature_celsius, second.bus_id) == ("Alarm", 207.7, 60, "0000:61:00.0")
    assert (second.npu_util_percent, second.hbm_used_mb) == (100, 30492)
    assert (third.health, third.power_watts, third.npu_util_percent, third.hbm_used_mb, third.hbm_total_mb) == (
        "OK",
        192.7,
        0,
        5413,
        131072,
    )
    assert table.processes == (
        InfoProcess(npu_id=0, chip_id=None, pid=1530715, name="python", memory_mb=4724),
        InfoProcess(npu_id=0, chip_id=None, pid=1655234, name="python", memory_mb=4728),
    )


def test_950pr_idle_row_without_process_header_25_7_rc1_6() -> None:
    table = info("info__950PR__25.7.rc1.6__1__partial")
    (only,) = table.chips
    assert (only.npu_id, only.chip_id, only.name, only.power_watts, only.temperature_celsius) == (0, 0, "Ascend950PR", 195.6, 56)
    assert (only.npu_util_percent, only.aicore_percent, only.bus_id) == (0, None, "0000:61:00.0")
    assert (only.hbm_used_mb, only.hbm_total_mb) == (5239, 131072)
    assert table.processes == () and table.idle_npus == (0,)


# --- hand-edited samples: not width fixtures, but their values are readable ----------------


def test_mangled_910_doc_with_processes() -> None:
    table = info("info__910-doc-anon__23.0.rc3-drv23.0.rc2.3__1__mangled")
    assert (table.tool_version, table.driver_version) == ("23.0.rc3", "23.0.rc2.3")
    assert len(table.chips) == 8
    assert (chip(table, 0).hugepages_used, chip(table, 0).hugepages_total) == (1123, 1123)
    assert (chip(table, 0).memory_used_mb, chip(table, 0).hbm_used_mb, chip(table, 0).hbm_total_mb) == (4565, 30710, 32768)
    assert table.processes is not None and len(table.processes) == 8
    assert table.processes[-1] == InfoProcess(npu_id=7, chip_id=0, pid=139090, name="python", memory_mb=30780)


def test_mangled_950dt_container_pid_na() -> None:
    table = info("info__950DT__25.6.rc1.b169__1__mangled")
    assert [c.npu_id for c in table.chips] == [0, 1, 6, 7]
    assert {c.bus_id for c in table.chips} == {None}  # "NA" on UB-attached boards
    assert [c.npu_util_percent for c in table.chips] == [0, 5, 0, 0]
    assert table.processes is not None and [p.pid for p in table.processes] == [3621066, 3624823, 3624824]
    assert table.processes[0] == InfoProcess(
        npu_id=6, chip_id=None, pid=3621066, name="/home/lp/sglang/worker.py", memory_mb=40000, container_pid=None
    )


def test_process_section_alone_is_not_an_info_table() -> None:
    text = load("info-process-table__950-A5__unknown__1__mangled")
    for require_version in (True, False):
        with pytest.raises(NpuSmiError) as error:
            parse_info(text, require_version=require_version)
        assert error.value.reason == "garbled"


# --- variations on real text -----------------------------------------------------------------


def test_every_info_fixture_is_covered() -> None:
    assert len(INFO_FIXTURES) == 27


def test_shell_prompt_before_table() -> None:
    text = load("info__910B3__25.5.1__1")
    assert parse_info("root@host:/# npu-smi info\n" + text) == parse_info(text)


def test_driver_warning_line() -> None:
    text = load("info__910B3__25.5.1__1") + (
        "[WARNING]The driver package may not be completely installed, which may cause function abnormal. Please reinstall it.\n"
    )
    table = parse_info(text)
    assert table.driver_warning
    assert len(table.chips) == 8 and table.processes is not None and len(table.processes) == 8


def test_crlf_line_endings() -> None:
    text = load("info__910_93-A3__25.2.0__1")
    assert parse_info(text.replace("\n", "\r\n")) == parse_info(text)


def test_garbled_value_becomes_none_not_failure() -> None:
    row = "| 0     910B3               | OK            | 99.4        34                0    / 0             |"
    text = load("info__910B3__25.5.1__1").replace(row, row.replace("34  ", "3?  "))
    table = parse_info(text)
    assert table.chips[0].temperature_celsius is None and table.chips[0].power_watts == 99.4
    assert table.chips[1].temperature_celsius == 32


def test_missing_value_makes_that_cell_none() -> None:
    row = "| 0                         | 0000:C1:00.0  | 0           0    / 0          59189/ 65536         |"
    text = load("info__910B3__25.5.1__1").replace(row, row.replace("59189/ 65536", "            "))
    first = parse_info(text).chips[0]
    # Three values under three names: which one is missing cannot be told, so none is kept.
    assert (first.aicore_percent, first.memory_used_mb, first.hbm_used_mb) == (None, None, None)
    assert first.bus_id == "0000:C1:00.0"


def test_garbled_npu_id_fails_the_table() -> None:
    text = load("info__910B3__25.5.1__1").replace("| 3     910B3", "| x     910B3")
    with pytest.raises(NpuSmiError) as error:
        parse_info(text)
    assert error.value.reason == "garbled"


def _cut_after(text: str, marker: str) -> str:
    return text[: text.index(marker) + len(marker)]


@pytest.mark.parametrize(
    "marker",
    [
        "| 3     910B3               | OK            | 93.2        35                0    / 0             |\n",
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n",
        "| 0                         | 0000:C1:00.0  | 0           0    / 0   ",
    ],
    ids=["inside-chip", "inside-header", "inside-row"],
)
def test_truncated(marker: str) -> None:
    with pytest.raises(NpuSmiError) as error:
        parse_info(_cut_after(load("info__910B3__25.5.1__1"), marker))
    assert error.value.reason == "truncated"


def test_cut_at_any_line_keeps_a_prefix_of_the_chips() -> None:
    text = load("info__910_93-A3__25.2.0__1")
    full = parse_info(text)
    lines = text.splitlines(keepends=True)
    for end in range(len(lines) + 1):
        try:
            table = parse_info("".join(lines[:end]))
        except NpuSmiError as error:
            assert error.reason in ("garbled", "truncated")
            continue
        assert table.chips == full.chips[: len(table.chips)]
        assert table.processes is None or table.processes == full.processes[: len(table.processes)]


@pytest.mark.parametrize("text", ["", "\n\n", "hello world", "+---+\n| a | b |\n+---+\n", "| npu-smi 1  Version: 1 |\n"])
def test_not_a_table(text: str) -> None:
    with pytest.raises(NpuSmiError) as error:
        parse_info(text)
    assert error.value.reason == "garbled"


@pytest.mark.parametrize(
    ("name", "reason", "code"),
    [
        ("error-dcmi-init-8005__container__unknown__1", "dcmi_init_failed", -8005),
        ("error-dcmi-init-8020__container__unknown__1", "device_busy", -8020),
        ("error-invalid-card-id__910A__23.0.7__1", "invalid_card_id", None),
    ],
)
def test_npu_smi_errors(name: str, reason: str, code: int | None) -> None:
    with pytest.raises(NpuSmiError) as error:
        parse_info(load(name))
    assert (error.value.reason, error.value.code) == (reason, code)


# --- robustness: only NpuSmiError may escape --------------------------------------------------

REASONS = {
    "garbled",
    "truncated",
    "dcmi_init_failed",
    "device_busy",
    "invalid_card_id",
    "invalid_type",
    "no_card",
    "no_chip",
    "not_supported",
    "bad_parameter",
    "permission_denied",
    "timeout",
    "invalid_device_id",
    "no_device",
    "not_ready",
    "dcmi_load_failed",
}


def _parse_or_error(text: str) -> None:
    for require_version in (True, False):
        try:
            result = parse_info(text, require_version=require_version)
        except NpuSmiError as error:
            assert error.reason in REASONS
            continue
        assert isinstance(result, InfoTable)


ROBUST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_TABLE_ALPHABET = st.sampled_from(list("|+-=/ \n0123456789.NA") + ["NPU", "Chip", "Health", "Version:", "npu-smi"])


@ROBUST
@given(st.text() | st.lists(_TABLE_ALPHABET).map("".join))
def test_arbitrary_text_never_crashes(text: str) -> None:
    _parse_or_error(text)


@ROBUST
@given(name=st.sampled_from(INFO_FIXTURES), data=st.data())
def test_mutated_fixtures_never_crash(name: str, data: st.DataObject) -> None:
    text = load(name)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    insert = data.draw(st.text(max_size=20) | _TABLE_ALPHABET)
    _parse_or_error(text[:start])  # truncated anywhere
    _parse_or_error(text[:start] + insert + text[end:])  # a span replaced by noise
    _parse_or_error(text[:start] + text[start:end] * 2 + text[end:])  # a span repeated
