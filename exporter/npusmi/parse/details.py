"""Parsers for npu-smi's per-card detail outputs: `-t usages`, `-t common`, `-t memory`,
`-t ecc` and `-t health` (the key/value format of keyvalue.py)."""

from __future__ import annotations

from collections.abc import Sequence

from exporter.core.values import is_placeholder
from exporter.npusmi.parse.keyvalue import (
    CHIP_COUNT,
    CHIP_ID,
    CHIP_NAME,
    HEADER_KEYS,
    NPU_ID,
    Line,
    apply_spec,
    check_blocks,
    check_chip_count,
    first_int,
    float_value,
    int_value,
    key_spec,
    norm,
    read_output,
    resolve_npu_id,
    spec_records,
    split_chips,
    str_value,
    truncated,
)
from exporter.npusmi.parse.records import (
    ChipCommon,
    ChipEcc,
    ChipHealth,
    ChipMemory,
    ChipUsages,
    CommonInfo,
    NpuSmiError,
)

# --- -t usages ---------------------------------------------------------------------------

_USAGES_SPEC = key_spec(
    # 310/310B print "Memory ..." and plain "Hugepages ..." where the rest print "DDR ...".
    ("ddr_capacity_mb", int_value, ["DDR Capacity(MB)", "Memory Capacity(MB)"]),
    ("ddr_usage_percent", float_value, ["DDR Usage Rate(%)", "Memory Usage Rate(%)"]),
    ("hugepages_total", int_value, ["DDR Hugepages Total(page)", "Hugepages Total(page)"]),
    ("hugepages_usage_percent", float_value, ["DDR Hugepages Usage Rate(%)", "Hugepages Usage Rate(%)"]),
    ("hbm_capacity_mb", int_value, ["HBM Capacity(MB)"]),
    ("hbm_usage_percent", float_value, ["HBM Usage Rate(%)"]),
    ("aicore_percent", float_value, ["Aicore Usage Rate(%)"]),
    ("aivector_percent", float_value, ["Aivector Usage Rate(%)", "Vectorcore Usage Rate(%)"]),  # 310P: Vectorcore
    ("aicube_percent", float_value, ["Aicube Usage Rate(%)"]),
    ("aicpu_percent", float_value, ["Aicpu Usage Rate(%)"]),
    ("ctrlcpu_percent", float_value, ["Ctrlcpu Usage Rate(%)"]),
    ("ddr_bandwidth_percent", float_value, ["DDR Bandwidth Usage Rate(%)", "Memory Bandwidth Usage Rate(%)"]),
    ("hbm_bandwidth_percent", float_value, ["HBM Bandwidth Usage Rate(%)"]),
    ("npu_util_percent", float_value, ["NPU Utilization(%)"]),
)


def parse_usages(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipUsages, ...]:
    """`npu-smi info -t usages -i N [-c C]`: one record per chip; pass ``chip_id=C`` with `-c`."""
    return spec_records(ChipUsages, text, "`-t usages`", _USAGES_SPEC, npu_id, chip_id)


# --- -t common ---------------------------------------------------------------------------

_COMMON_SPEC = key_spec(
    ("memory_usage_percent", float_value, ["Memory Usage Rate(%)"]),
    ("hbm_usage_percent", float_value, ["HBM Usage Rate(%)"]),
    ("aicore_percent", float_value, ["Aicore Usage Rate(%)"]),
    ("aicore_freq_mhz", float_value, ["Aicore Freq(MHZ)"]),
    ("aicore_cur_freq_mhz", float_value, ["Aicore curFreq(MHZ)"]),
    ("aicore_count", int_value, ["Aicore Count"]),
    ("temperature_celsius", float_value, ["Temperature(C)"]),
    ("power_watts", float_value, ["NPU Real-time Power(W)"]),
    ("rated_power_watts", float_value, ["Rated Power Dissipation(W)"]),
)
# The MCU block: its own Temperature(C) and, on 310P, the card's real-time power.
_MCU_SPEC = key_spec(
    ("mcu_temperature_celsius", float_value, ["Temperature(C)"]),
    ("mcu_power_watts", float_value, ["NPU Real-time Power(W)"]),
)


def parse_common(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> CommonInfo:
    """`npu-smi info -t common -i N`: chip blocks (opened by Chip ID) and the MCU block.

    The MCU block ("Chip Name : mcu") repeats Temperature(C): it is kept apart so that it never
    overwrites the chip's. A 3559 CPU block ("Chip Name : 3559") is skipped.
    """
    lines = read_output(text, "`-t common`", _COMMON_SPEC)
    printed_npu, chip_count = first_int(lines, NPU_ID), first_int(lines, CHIP_COUNT)
    leading: list[Line] = []  # data before any Chip ID / Chip Name line
    chips: list[tuple[int, list[Line]]] = []
    others: list[tuple[str, list[Line]]] = []  # (chip name, lines) of MCU/CPU blocks
    current = leading
    for line in lines:
        if line.key == CHIP_ID:
            current = []
            printed_chip = int_value(line.value)
            if printed_chip is not None:
                chips.append((printed_chip, current))
        elif line.key == CHIP_NAME:
            current = []
            others.append((line.value.casefold(), current))
        elif line.key not in HEADER_KEYS:
            current.append(line)
    if not chips and chip_count is None and any(line.key in _COMMON_SPEC for line in leading):
        chips = [(0 if chip_id is None else chip_id, leading)]  # 950 V2 or a `-c` answer: no Chip ID line
    mcu = next((block for name, block in others if name == "mcu"), [])
    if not chips and not mcu:
        raise truncated("`-t common`")
    # Chip ID (and Chip Name) open a block here: as the last line they are a cut output, and a
    # lone block is never known to be whole.
    if lines[-1].key in (CHIP_ID, CHIP_NAME):
        raise NpuSmiError("truncated", f"`-t common` output ends after {lines[-1].raw!r}")
    check_chip_count("`-t common`", chip_count, len(chips), chip_id, loop_ended=bool(others), lone_block_whole=False)
    npu = resolve_npu_id(printed_npu, npu_id)
    return CommonInfo(
        npu_id=npu,
        chips=tuple(ChipCommon(npu_id=npu, chip_id=chip, **apply_spec(block, _COMMON_SPEC)) for chip, block in chips),
        **apply_spec(mcu, _MCU_SPEC),
    )


# --- -t memory / -t ecc -----------------------------------------------------

_MEMORY_SPEC = key_spec(
    ("ddr_capacity_mb", int_value, ["DDR Capacity(MB)", "Capacity(MB)"]),  # 310/310B: no "DDR "
    ("ddr_clock_mhz", float_value, ["DDR Clock Speed(MHz)", "Clock Speed(MHz)"]),
    ("hbm_capacity_mb", int_value, ["HBM Capacity(MB)"]),
    ("hbm_clock_mhz", float_value, ["HBM Clock Speed(MHz)"]),
    ("hbm_temperature_celsius", float_value, ["HBM Temperature(C)"]),
    ("hbm_manufacturer_id", str_value, ["HBM Manufacturer ID"]),
)


def parse_memory(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipMemory, ...]:
    """`npu-smi info -t memory -i N`: one record per chip."""
    return spec_records(ChipMemory, text, "`-t memory`", _MEMORY_SPEC, npu_id, chip_id)


_ECC_SPEC = key_spec(
    # 310/310B print only "Single-bit/Double-bit Error Count" (their DDR).
    ("ddr_single_bit_errors", int_value, ["DDR Single Bit Error Count", "Single-bit Error Count"]),
    ("ddr_double_bit_errors", int_value, ["DDR Double Bit Error Count", "Double-bit Error Count"]),
    ("ddr_single_bit_aggregate_total", int_value, ["DDR Single Bit Aggregate Total Err Cnt"]),
    ("ddr_double_bit_aggregate_total", int_value, ["DDR Double Bit Aggregate Total Err Cnt"]),
    ("ddr_single_bit_isolated_pages", int_value, ["DDR Single Bit Isolated Pages Count"]),
    ("ddr_double_bit_isolated_pages", int_value, ["DDR Double Bit Isolated Pages Count"]),
    ("hbm_single_bit_errors", int_value, ["HBM Single Bit Error Count"]),
    ("hbm_double_bit_errors", int_value, ["HBM Double Bit Error Count"]),
    ("hbm_single_bit_aggregate_total", int_value, ["HBM Single Bit Aggregate Total Err Cnt"]),
    ("hbm_double_bit_aggregate_total", int_value, ["HBM Double Bit Aggregate Total Err Cnt"]),
    ("hbm_single_bit_isolated_pages", int_value, ["HBM Single Bit Isolated Pages Count"]),
    ("hbm_double_bit_isolated_pages", int_value, ["HBM Double Bit Isolated Pages Count"]),
)


def parse_ecc(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipEcc, ...]:
    """`npu-smi info -t ecc -i N`: one record per chip (keys are padded to 40, not 30)."""
    return spec_records(ChipEcc, text, "`-t ecc`", _ECC_SPEC, npu_id, chip_id)


# --- -t health ---------------------------------------------------------------------------

_HEALTH_STATUS, _ERROR_CODE, _ERROR_INFO = (norm(k) for k in ("Health Status", "Error Code", "Error Information"))
_HEALTH_KEYS = frozenset({_HEALTH_STATUS, _ERROR_CODE, _ERROR_INFO})
_UNRESOLVED = "failed to get error information"  # printed as its own line for a later code


def _error_information(block: Sequence[Line]) -> tuple[str, ...]:
    """ "Error Information" and its continuation lines (empty key, e.g. ``\\t<31 spaces>: text``)."""
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
        if str_value(value) is not None:
            info.append(" ".join(value.split()))
    return tuple(info)


def _error_codes(block: Sequence[Line]) -> tuple[str, ...]:
    value = next((line.value for line in block if line.key == _ERROR_CODE), "")
    # "NA" (and "0" in some builds) mean no error; several codes are space-separated.
    return tuple(code for code in value.split() if not is_placeholder(code) and code != "0")


def parse_health(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipHealth, ...]:
    """`npu-smi info -t health -i N [-c C]`.

    The `-c` form prints neither NPU ID nor Chip ID: pass the ids that were queried.
    """
    blocks = split_chips(read_output(text, "`-t health`", _HEALTH_KEYS, structure=False))
    chips: list[tuple[int | None, list[Line]]] = list(blocks.chips)
    if not chips:
        if blocks.chip_count is not None:  # a card answer cut before its first Chip ID
            raise truncated("`-t health`")
        chips = [(chip_id, blocks.tail)]
    else:
        check_blocks("`-t health`", blocks, len(chips), chip_id)
    records = tuple(
        ChipHealth(
            npu_id=resolve_npu_id(blocks.npu_id, npu_id),
            chip_id=chip,
            status=str_value(next((line.value for line in block if line.key == _HEALTH_STATUS), "")),
            error_codes=_error_codes(block),
            error_information=_error_information(block),
        )
        for chip, block in chips
        if any(line.key in _HEALTH_KEYS for line in block)
    )
    if not records:
        raise truncated("`-t health`")
    return records
