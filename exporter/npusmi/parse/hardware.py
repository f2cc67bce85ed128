"""Parsers for npu-smi's per-chip hardware readings: `-t volt`, `-t pcie-err` (`-t err-count`
on Atlas 310 cards), `-t sensors`, `-t sio-info` and `-t spod-info` (the key/value format of
keyvalue.py: chip blocks closed by Chip ID, or one implicit chip on 950 and `-c` answers).

A product that lacks a type answers "This device does not support querying <type>.": every
parser raises NpuSmiError(reason ``not_supported``) for it, which the source remembers.
"""

from __future__ import annotations

from typing import Any

from exporter.npusmi.parse.keyvalue import (
    CHIP_COUNT,
    CHIP_ID,
    CHIP_NAME,
    NPU_ID,
    KeySpec,
    apply_spec,
    check_chip_count,
    first_int,
    float_value,
    int_value,
    key_spec,
    norm,
    per_chip,
    read_output,
    resolve_npu_id,
    spec_records,
    str_value,
    truncated,
)
from exporter.npusmi.parse.records import (
    ChipPcieErrors,
    ChipSensors,
    ChipSio,
    ChipVoltage,
    SuperPod,
)

# --- -t volt -----------------------------------------------------------------------------

_VOLTAGE = norm("Voltage(V)")


def parse_volt(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipVoltage, ...]:
    """`npu-smi info -t volt -i N [-c C]`: one record per chip.

    Here ``Chip ID`` OPENS a chip's block (its Voltage follows); 310B then prints the MCU's
    Voltage closed by ``Chip Name : MCU``, which is not a chip and is left out. Without a
    Chip ID line (950, a `-c` answer) the first Voltage is the one chip's.
    """
    lines = read_output(text, "`-t volt`", (_VOLTAGE,), structure=False)
    printed_npu, chip_count = first_int(lines, NPU_ID), first_int(lines, CHIP_COUNT)
    chips: dict[int, float | None] = {}
    current: int | None = None  # the chip whose Voltage line is awaited
    leading: list[float | None] = []  # a Voltage before any Chip ID line
    for line in lines:
        if line.key == CHIP_ID:
            current = int_value(line.value)
        elif line.key == _VOLTAGE:
            if current is not None and current not in chips:
                chips[current] = float_value(line.value)
            elif not chips and not leading and current is None:
                leading.append(float_value(line.value))
            current = None
    ended = any(line.key == CHIP_NAME for line in lines)
    if not chips and leading and chip_count is None:
        chips = {0 if chip_id is None else chip_id: leading[0]}
    if not chips:
        raise truncated("`-t volt`")
    check_chip_count("`-t volt`", chip_count, len(chips), chip_id, loop_ended=ended, lone_block_whole=False)
    npu = resolve_npu_id(printed_npu, npu_id)
    return tuple(ChipVoltage(npu_id=npu, chip_id=chip, voltage_volts=volts) for chip, volts in chips.items())


# --- -t pcie-err / -t err-count ------------------------------------------------------------

# Printed label -> the `type` label value; the 310-class labels are their own types.
_PCIE_TYPES = (
    ("tx", "TX Error Count"),
    ("rx", "RX Error Count"),
    ("lcrc", "Lcrc Error Count"),
    ("ecrc", "Ecrc Error Count"),
    ("retry", "Retry Count"),
    ("pcs_rx", "Pcs Rx Error Count"),
    ("phy_lane", "Phy Lane Error Count"),
    ("dl_lcrc", "Dl Lcrc Error Count"),
    ("dl_dcrc", "Dl Dcrc Error Count"),
)
PCIE_ERROR_TYPES = tuple(name for name, _ in _PCIE_TYPES)
_PCIE_SPEC = key_spec(*((name, int_value, [label]) for name, label in _PCIE_TYPES))


def parse_pcie_errors(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipPcieErrors, ...]:
    """`npu-smi info -t pcie-err -i N` (or `-t err-count`): the counters printed, per chip."""
    found = _printed("`-t pcie-err`", text, _PCIE_SPEC, PCIE_ERROR_TYPES, npu_id, chip_id)
    return tuple(ChipPcieErrors(npu_id=npu, chip_id=chip, counts=counts) for npu, chip, counts in found)


# --- -t sensors --------------------------------------------------------------------------

_SENSORS = (
    ("soc_max", "Soc Max Temperature (C)"),
    ("sfp", "SFP Temperature (C)"),
    ("ndie", "NDIE Temperature (C)"),
    ("hbm", "HBM Temperature (C)"),
)
SENSOR_NAMES = tuple(name for name, _ in _SENSORS)
_SENSORS_SPEC = key_spec(*((name, float_value, [label]) for name, label in _SENSORS))


def parse_sensors(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipSensors, ...]:
    """`npu-smi info -t sensors -i N`: the temperatures printed per chip; ``NA`` is absent."""
    found = _printed("`-t sensors`", text, _SENSORS_SPEC, SENSOR_NAMES, npu_id, chip_id)
    return tuple(ChipSensors(npu_id=npu, chip_id=chip, temperatures=readings) for npu, chip, readings in found)


def _printed(
    what: str, text: str, spec: KeySpec, names: tuple[str, ...], npu_id: int | None, chip_id: int | None
) -> list[tuple[int, int, tuple[tuple[str, Any], ...]]]:
    """(npu, chip, the (name, value) pairs it printed, in ``names`` order; NA left out) per chip."""
    npu, chips = per_chip(text, what, spec, npu_id, chip_id)
    out = []
    for chip, block in chips:
        values = apply_spec(block, spec)
        out.append((npu, chip, tuple((name, values[name]) for name in names if values.get(name) is not None)))
    return out


# --- -t sio-info -------------------------------------------------------------------------

_SIO_SPEC = key_spec(
    ("tx_errors", int_value, ["TX Error Count"]),
    ("rx_errors", int_value, ["RX Error Count"]),
)


def parse_sio(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipSio, ...]:
    """`npu-smi info -t sio-info -i N`: the die-to-die link's error counts per chip."""
    return spec_records(ChipSio, text, "`-t sio-info`", _SIO_SPEC, npu_id, chip_id)


# --- -t spod-info ------------------------------------------------------------------------

_SPOD_SPEC = key_spec(
    ("sdid", int_value, ["SDID"]),
    ("super_pod_size", int_value, ["Super Pod Size"]),
    ("super_pod_id", int_value, ["Super Pod ID"]),
    ("server_index", int_value, ["Server Index"]),
    ("chassis_id", int_value, ["Chassis ID"]),
    ("super_pod_type", str_value, ["Super Pod Type"]),
)


def parse_superpod(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[SuperPod, ...]:
    """`npu-smi info -t spod-info -i N -c C`: pass the queried ids (the answer prints neither)."""
    return spec_records(SuperPod, text, "`-t spod-info`", _SPOD_SPEC, npu_id, chip_id)
