"""Key/value parsers (`info -m`, `info -l`, `info -t <type>`) on every real sample.

Expected values are read off the fixture text by hand (see each .src for provenance).
"""

from __future__ import annotations

import re

import pytest

from exporter.npusmi.parse.details import (
    parse_common,
    parse_ecc,
    parse_health,
    parse_memory,
    parse_usages,
)
from exporter.npusmi.parse.inventory import parse_board, parse_chip_map
from exporter.npusmi.parse.records import (
    ChipCommon,
    ChipEcc,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipUsages,
    NpuSmiError,
)
from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


# --- info -m -------------------------------------------------------------------------------


def _rows(*rows: tuple) -> tuple[ChipMapEntry, ...]:
    return tuple(ChipMapEntry(*row) for row in rows)


def test_chip_map_910b3_real_tabs_and_trailing_spaces():
    expected = []
    for npu in range(8):  # each NPU: chip 0 "Ascend 910B3" with logic id = NPU id, chip 1 Mcu "-"
        expected += [(npu, 0, npu, "Ascend 910B3"), (npu, 1, None, "Mcu")]
    entries = parse_chip_map(load("info-m__910B3__25.5.1__1"))
    assert entries == _rows(*expected)
    assert [e.is_chip for e in entries[:2]] == [True, False]


def test_chip_map_910a_no_mcu_rows():
    assert parse_chip_map(load("info-m__910A__23.0.x__1")) == _rows(*((n, 0, n, "Ascend 910A") for n in range(8)))


def test_chip_map_910b_anonymised_without_tab():
    expected = []
    for npu in range(8):
        expected += [(npu, 0, npu, "Ascend xxx"), (npu, 1, None, "Mcu")]
    assert parse_chip_map(load("info-m__910B-8card-anon__unknown__1")) == _rows(*expected)


def test_chip_map_310p_duo_two_chips_and_mcu_per_card():
    assert parse_chip_map(load("info-m__310P-300IDuo-x4-anon__unknown__1")) == _rows(
        (1, 0, 0, "Ascend xxx"),
        (1, 1, 1, "Ascend xxx"),
        (1, 2, None, "Mcu"),
        (2, 0, 2, "Ascend xxx"),
        (2, 1, 3, "Ascend xxx"),
        (2, 2, None, "Mcu"),
        (4, 0, 4, "Ascend xxx"),
        (4, 1, 5, "Ascend xxx"),
        (4, 2, None, "Mcu"),
        (5, 0, 6, "Ascend xxx"),
        (5, 1, 7, "Ascend xxx"),
        (5, 2, None, "Mcu"),
    )


def test_chip_map_310p3_large_npu_id_narrow_columns():
    assert parse_chip_map(load("info-m__310P3__25.5.2__1")) == _rows(
        (32896, 0, 0, "Ascend 310P3"),
        (32896, 1, None, "Mcu"),
    )


def test_chip_map_a3_phy_id_column_partial():
    assert parse_chip_map(load("info-m__910_93-A3__unknown__1__partial")) == (
        ChipMapEntry(0, 0, 0, "Ascend910", phy_id=0),
        ChipMapEntry(0, 1, 1, "Ascend910", phy_id=1),
        ChipMapEntry(0, 2, None, "Mcu", phy_id=None),
        ChipMapEntry(1, 0, 2, "Ascend910", phy_id=2),
    )


def test_chip_map_950_layout_from_print_source():
    # print_mapping_info_950: "\t%-30s %-30s %-30s %-30s %-30s" NPU ID / Slot ID / Chip ID / Chip Phy-ID / Chip Name.
    header = "\t" + " ".join(f"{c:<30}" for c in ("NPU ID", "Slot ID", "Chip ID", "Chip Phy-ID", "Chip Name"))
    row = "\t" + " ".join(f"{c:<30}" for c in ("3", "4", "0", "3")) + " Ascend950PR"
    assert parse_chip_map(f"{header}\n{row}\n") == (ChipMapEntry(3, 0, None, "Ascend950PR", phy_id=3, slot_id=4),)


def test_chip_map_header_with_single_spaces():
    text = "NPU ID Chip ID Chip Logic ID Chip Name\n0 0 0 Ascend 910B3\n0 1 - Mcu\n"
    assert parse_chip_map(text) == _rows((0, 0, 0, "Ascend 910B3"), (0, 1, None, "Mcu"))


# --- -t usages -----------------------------------------------------------------------------


def test_usages_910b3_25_5_1():
    assert parse_usages(load("info-t-usages__910B3__25.5.1__1")) == (
        ChipUsages(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_usage_percent=0,
            hugepages_total=0,
            hugepages_usage_percent=0,
            hbm_capacity_mb=65536,
            hbm_usage_percent=90,
            aicore_percent=0,
            aivector_percent=0,
            aicube_percent=0,
            aicpu_percent=0,
            ctrlcpu_percent=7,
            ddr_bandwidth_percent=0,
            hbm_bandwidth_percent=0,
            npu_util_percent=0,
        ),
    )


def test_usages_910b_it21hmdc_25_5_1():
    assert parse_usages(load("info-t-usages__910B-IT21HMDC__25.5.1__1")) == (
        ChipUsages(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_usage_percent=0,
            hugepages_total=0,
            hugepages_usage_percent=0,
            hbm_capacity_mb=65536,
            hbm_usage_percent=5,
            aicore_percent=0,
            aivector_percent=0,
            aicube_percent=0,
            aicpu_percent=0,
            ctrlcpu_percent=6,
            ddr_bandwidth_percent=0,
            hbm_bandwidth_percent=0,
            npu_util_percent=0,
        ),
    )


def test_usages_910b1_23_0_rc2_has_no_npu_util_nor_aicube():
    assert parse_usages(load("info-t-usages__910B1__23.0.rc2__1")) == (
        ChipUsages(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_usage_percent=0,
            hugepages_total=0,
            hugepages_usage_percent=0,
            hbm_capacity_mb=65536,
            hbm_usage_percent=4,
            aicore_percent=0,
            aivector_percent=0,
            aicpu_percent=0,
            ctrlcpu_percent=0,
            ddr_bandwidth_percent=0,
            hbm_bandwidth_percent=0,
            npu_util_percent=None,
            aicube_percent=None,
        ),
    )


def test_usages_910a_first_gen_ddr_and_hbm():
    assert parse_usages(load("info-t-usages__910A__23.0.5__1")) == (
        ChipUsages(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=13553,
            ddr_usage_percent=6,
            hugepages_total=0,
            hugepages_usage_percent=0,
            hbm_capacity_mb=31129,
            hbm_usage_percent=0,
            aicore_percent=0,
            aicpu_percent=0,
            ctrlcpu_percent=0,
            ddr_bandwidth_percent=0,
            hbm_bandwidth_percent=0,
        ),
    )


def test_usages_310p_duo_two_chips_vectorcore():
    common = dict(
        npu_id=1,
        ddr_usage_percent=3,
        hugepages_total=0,
        hugepages_usage_percent=0,
        aicore_percent=0,
        aicpu_percent=0,
        aivector_percent=0,
        ddr_bandwidth_percent=51,
    )
    assert parse_usages(load("info-t-usages__310P-300IDuo__unknown__1")) == (
        ChipUsages(chip_id=0, ddr_capacity_mb=44280, ctrlcpu_percent=2, **common),
        ChipUsages(chip_id=1, ddr_capacity_mb=43693, ctrlcpu_percent=3, **common),
    )


def test_usages_950_has_no_chip_lines():
    assert parse_usages(load("info-t-usages__950-Atlas350-doc__unknown__1")) == (
        ChipUsages(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_usage_percent=0,
            hugepages_total=0,
            hugepages_usage_percent=0,
            hbm_capacity_mb=131072,
            hbm_usage_percent=3,
            aicore_percent=0,
            aivector_percent=0,
            aicube_percent=0,
            aicpu_percent=0,
            ctrlcpu_percent=40,
            ddr_bandwidth_percent=0,
            hbm_bandwidth_percent=3,
            npu_util_percent=0,
        ),
    )


def test_usages_310_memory_keys():
    # print_chip_memory_usages_info for 310/310B: "Memory ..." and plain "Hugepages ..." keys.
    text = (
        "\tNPU ID                         : 2048\n\tChip Count                     : 1\n\n"
        "\tMemory Capacity(MB)            : 7759\n\tMemory Usage Rate(%)           : 9\n"
        "\tHugepages Total(page)          : 0\n\tHugepages Usage Rate(%)        : 0\n"
        "\tAicore Usage Rate(%)           : NA\n\tMemory Bandwidth Usage Rate(%) : 2\n"
        "\tChip ID                        : 0\n"
    )
    assert parse_usages(text) == (
        ChipUsages(
            npu_id=2048,
            chip_id=0,
            ddr_capacity_mb=7759,
            ddr_usage_percent=9,
            hugepages_total=0,
            hugepages_usage_percent=0,
            aicore_percent=None,
            ddr_bandwidth_percent=2,
        ),
    )


def test_usages_cut_short_is_truncated():
    text = load("info-t-usages__310P-300IDuo__unknown__1")
    cut = text[: text.rindex("Chip ID")]  # chip 1 lost its closing "Chip ID : 1"
    with pytest.raises(NpuSmiError) as caught:  # "Chip Count : 2" announced two blocks
        parse_usages(cut)
    assert caught.value.reason == "truncated"
    # A query for one chip (-c 0) may print fewer blocks than the card's Chip Count.
    assert [u.chip_id for u in parse_usages(cut, chip_id=0)] == [0]


# --- -t common -----------------------------------------------------------------------------


def test_common_910b3_mcu_temperature_kept_apart():
    info = parse_common(load("info-t-common__910B3__25.5.1__1"))
    assert info.npu_id == 0
    assert info.chips == (
        ChipCommon(
            npu_id=0,
            chip_id=0,
            memory_usage_percent=0,
            hbm_usage_percent=90,
            aicore_percent=0,
            aicore_freq_mhz=1800,
            aicore_cur_freq_mhz=800,
            aicore_count=20,
            temperature_celsius=33,
            power_watts=99.7,
        ),
    )
    assert (info.mcu_temperature_celsius, info.mcu_power_watts) == (31, None)


def test_common_910b1_23_0_rc2():
    info = parse_common(load("info-t-common__910B1__23.0.rc2__1"))
    assert info.npu_id == 1
    assert info.chips == (
        ChipCommon(
            npu_id=1,
            chip_id=0,
            memory_usage_percent=0,
            hbm_usage_percent=4,
            aicore_percent=0,
            aicore_freq_mhz=1800,
            aicore_cur_freq_mhz=800,
            aicore_count=24,
            temperature_celsius=46,
            power_watts=93.4,
        ),
    )
    assert info.mcu_temperature_celsius == 38


def test_common_910_doc_without_blank_lines_or_mcu():
    info = parse_common(load("info-t-common__910-doc__unknown__1"))
    assert info.chips == (
        ChipCommon(
            npu_id=0,
            chip_id=0,
            memory_usage_percent=6,
            hbm_usage_percent=0,
            aicore_percent=0,
            aicore_freq_mhz=900,
            aicore_cur_freq_mhz=900,
            aicore_count=30,
            temperature_celsius=41,
            power_watts=71.7,
        ),
    )
    assert (info.mcu_temperature_celsius, info.mcu_power_watts) == (None, None)


def test_common_310p_duo_card_power_in_mcu_block():
    info = parse_common(load("info-t-common__310P-300IDuo__unknown__1"))
    chip = dict(npu_id=1, memory_usage_percent=3, aicore_percent=0, aicore_freq_mhz=1080, aicore_cur_freq_mhz=960)
    assert info.npu_id == 1
    assert info.chips == (
        ChipCommon(chip_id=0, temperature_celsius=60, **chip),
        ChipCommon(chip_id=1, temperature_celsius=59, **chip),
    )
    assert (info.mcu_temperature_celsius, info.mcu_power_watts) == (48, 45.2)


# --- -t memory / ecc ---------------------------------------------------------------------


def test_memory_910b3():
    assert parse_memory(load("info-t-memory__910B3__25.5.1__1")) == (
        ChipMemory(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_clock_mhz=0,
            hbm_capacity_mb=65536,
            hbm_clock_mhz=1600,
            hbm_temperature_celsius=31,
            hbm_manufacturer_id="0x57",
        ),
    )


def test_memory_950_doc_no_chip_lines():
    assert parse_memory(load("info-t-memory__950-Atlas350-doc__unknown__1")) == (
        ChipMemory(
            npu_id=0,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_clock_mhz=0,
            hbm_capacity_mb=131072,
            hbm_clock_mhz=3200,
            hbm_temperature_celsius=63,
            hbm_manufacturer_id="0x5A",
        ),
    )


def test_memory_mangled_annotations_after_values():
    # Author comments ("1600     <- HBM ...") follow the numbers; the first word is the value.
    assert parse_memory(load("info-t-memory__910-32GB__unknown__1__mangled")) == (
        ChipMemory(
            npu_id=1,
            chip_id=0,
            ddr_capacity_mb=0,
            ddr_clock_mhz=0,
            hbm_capacity_mb=32768,
            hbm_clock_mhz=1600,
            hbm_temperature_celsius=35,
            hbm_manufacturer_id="0x57",
        ),
    )


def test_ecc_910_doc_keys_padded_to_40():
    zeros = {
        f"{mem}_{kind}": 0
        for mem in ("ddr", "hbm")
        for kind in (
            "single_bit_errors",
            "double_bit_errors",
            "single_bit_aggregate_total",
            "double_bit_aggregate_total",
            "single_bit_isolated_pages",
            "double_bit_isolated_pages",
        )
    }
    assert parse_ecc(load("info-t-ecc__910-doc__unknown__1")) == (ChipEcc(npu_id=1, chip_id=0, **zeros),)


# --- -t health -----------------------------------------------------------------------------


def test_health_ok_prints_no_ids():
    assert parse_health(load("info-t-health__910A__23.0.x__1"), npu_id=0, chip_id=0) == (
        ChipHealth(npu_id=0, chip_id=0, status="OK", error_codes=(), error_information=()),
    )


def test_health_alarm_multiline_information():
    assert parse_health(load("info-t-health__910A__23.0.7__2"), npu_id=0, chip_id=0) == (
        ChipHealth(
            npu_id=0,
            chip_id=0,
            status="Alarm",
            error_codes=("A4025021", "8C03A000", "8C084E00"),
            error_information=(
                "ascend_monitor adda heart beat lost error",
                "node type=process-manager, sensor type=General Software, event state=The process start failed or exit abnormally",
                "node type=adda, sensor type=Heartbeat Sensor, event state=Heartbeat Lost.",
            ),
        ),
    )


def test_health_without_npu_id_needs_one():
    with pytest.raises(NpuSmiError) as caught:
        parse_health(load("info-t-health__910A__23.0.x__1"))
    assert caught.value.reason == "truncated"


def test_health_unresolved_code_lines():
    # print_diagnosis_info prints "Failed to get error information ..." right after "Error Information :".
    text = (
        "\tHealth Status                  : Warning\n\tError Code                     : 80E18005 80CB8009\n"
        "\tError Information              :Failed to get error information for error code : 0x80e18005\n"
        "Failed to get error information for error code : 0x80cb8009\n"
    )
    (health,) = parse_health(text, npu_id=7)
    assert (health.npu_id, health.chip_id, health.status) == (7, None, "Warning")
    assert health.error_codes == ("80E18005", "80CB8009")
    assert health.error_information == (
        "Failed to get error information for error code : 0x80e18005",
        "Failed to get error information for error code : 0x80cb8009",
    )


# --- -t board [-c] -------------------------------------------------------------------------


def test_board_910b3_card():
    board = parse_board(load("info-t-board__910B3__25.5.1__1"))
    assert (board.npu_id, board.chip_id, board.product_name, board.model, board.serial_number) == (
        0,
        None,
        "IT21HMDC_Bin6",
        None,
        "1023C7991472",
    )
    assert (board.software_version, board.firmware_version, board.pcie_bus_info, board.chip_count) == (
        "25.5.1",
        "7.7.0.6.236",
        "0000:C1:00.0",
        1,
    )
    assert (board.chip_name, board.vdie_id) == (None, None)
    fields = dict(board.fields)
    assert len(board.fields) == 19
    assert (fields["PCI Device ID"], fields["Subsystem Device ID"], fields["Model"]) == ("0xD802", "0x3000", "NA")


def test_board_910b_it21hmdc_card():
    board = parse_board(load("info-t-board__910B-IT21HMDC__25.5.1__1"))
    assert (board.npu_id, board.product_name, board.serial_number, board.software_version) == (0, "IT21HMDC_Bin5", "1025C9048791", "25.5.1")
    assert (board.firmware_version, board.pcie_bus_info, board.chip_count) == ("7.8.0.6.201", "0000:C1:00.0", 1)
    assert dict(board.fields)["Board ID"] == "0x60"


def test_board_910a_card_without_product_fields():
    board = parse_board(load("info-t-board__910A__23.0.5__1"))
    assert (board.npu_id, board.chip_id, board.product_name, board.serial_number) == (0, None, None, None)
    assert (board.software_version, board.firmware_version, board.chip_count) == ("23.0.5", "7.1.0.7.220", 1)
    assert dict(board.fields)["PCI Device ID"] == "0xD801"


def test_board_910a_chip_vdie_id():
    board = parse_board(load("info-t-board-chip__910A__23.0.5__1"))
    assert (board.npu_id, board.chip_id, board.chip_name, board.pcie_bus_info) == (0, 0, "910A", "0000:61:00.0")
    assert board.vdie_id == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert dict(board.fields)["NDie ID"] == "27216594 20401010 4E10C8D4 14CC040A A4102003"
    assert dict(board.fields)["Chip Type"] == "Ascend"


def test_board_950_mangled_extra_keys_kept():
    board = parse_board(load("info-t-board__950PR__25.7.rc1.6__1__mangled"))
    assert (board.npu_id, board.chip_name, board.software_version) == (0, "Ascend950PR", "25.7.rc1.6")
    assert dict(board.fields)["NPU Name"] == "9579"


def test_board_310_die_id_drops_chip_version_prefix():
    # 310/310B: printf("%-30s : %s,", "Die ID", chip_ver) then five " %08X" words.
    text = "NPU ID : 2048\nChip ID : 0\nChip Name : 310\nDie ID : V100, 0A1B2C3D 00000000 11111111 22222222 33333333\n"
    assert parse_board(text).vdie_id == "0A1B2C3D 00000000 11111111 22222222 33333333"


# --- errors and unreadable text ------------------------------------------------------------

PARSERS = (parse_chip_map, parse_usages, parse_common, parse_memory, parse_health, parse_ecc, parse_board)


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize(
    ("name", "reason", "code"),
    [
        ("error-dcmi-init-8005__container__unknown__1", "dcmi_init_failed", -8005),
        ("error-dcmi-init-8020__container__unknown__1", "device_busy", -8020),
        ("error-invalid-card-id__910A__23.0.7__1", "invalid_card_id", None),
    ],
)
def test_error_outputs_raise(parser, name, reason, code):
    with pytest.raises(NpuSmiError) as caught:
        parser(load(name))
    assert (caught.value.reason, caught.value.code) == (reason, code)


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", ["", "\n\n", "Segmentation fault (core dumped)\n", "hello: world\n"])
def test_unrecognisable_text_is_garbled(parser, text):
    with pytest.raises(NpuSmiError) as caught:
        parser(text)
    assert caught.value.reason == "garbled"


def test_no_card_message():
    with pytest.raises(NpuSmiError) as caught:
        parse_chip_map("There is no NPU card on this server.\n")
    assert caught.value.reason == "no_card"


# --- whitespace variants parse the same ----------------------------------------------------

KEYVALUE_SAMPLES = [
    (parse_usages, "info-t-usages__910B3__25.5.1__1"),
    (parse_common, "info-t-common__910B3__25.5.1__1"),
    (parse_health, "info-t-health__910A__23.0.7__2"),
    (parse_board, "info-t-board-chip__910A__23.0.5__1"),
    (parse_ecc, "info-t-ecc__910-doc__unknown__1"),
]


@pytest.mark.parametrize(("parser", "name"), KEYVALUE_SAMPLES, ids=[n for _, n in KEYVALUE_SAMPLES])
def test_tabs_padding_and_line_endings_do_not_matter(parser, name):
    text = load(name)
    variants = [
        text.replace("\t", "        "),  # terminal-expanded TAB
        "\n".join(line.strip() for line in text.splitlines()),  # no indentation at all
        "\n".join(re.sub(r"\s+:", " :", line, count=1) for line in text.splitlines()),  # key padding removed
        text.replace("\n", "\r\n") + "\n\n",  # CRLF, trailing blank lines
    ]
    expected = parser(text, npu_id=0)
    for variant in variants:
        assert parser(variant, npu_id=0) == expected


def test_chip_map_tabs_and_trailing_spaces_do_not_matter():
    text = load("info-m__910B3__25.5.1__1")
    stripped = "\n".join(line.strip() for line in text.splitlines())
    assert parse_chip_map(stripped) == parse_chip_map(text) == parse_chip_map(text.replace("\n", "\r\n"))
