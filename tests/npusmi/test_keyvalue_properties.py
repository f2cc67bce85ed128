"""Property: whatever text npu-smi (or a broken pipe) hands over, a key/value parser either
returns its record type or raises NpuSmiError - nothing else escapes."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.npusmi.parse.details import (
    parse_common,
    parse_ecc,
    parse_health,
    parse_memory,
    parse_usages,
)
from exporter.npusmi.parse.faultevents import ChipFaultEvents, parse_current_fault_event
from exporter.npusmi.parse.hardware import parse_pcie_errors, parse_sensors, parse_sio, parse_superpod, parse_volt
from exporter.npusmi.parse.hccs import parse_hccs, parse_hccs_bandwidth
from exporter.npusmi.parse.inventory import parse_board, parse_chip_map
from exporter.npusmi.parse.records import (
    BoardInfo,
    ChipEcc,
    ChipHccs,
    ChipHccsBandwidth,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipPcieErrors,
    ChipSensors,
    ChipSio,
    ChipUsages,
    ChipVoltage,
    CommonInfo,
    NpuSmiError,
    SuperPod,
)
from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES
# Every copied sample (all types, errors included): cross-feeding them is part of the test.
SAMPLES = [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.glob("*.txt"))]

# (parser, type of one returned record); tuple-returning parsers are checked element-wise.
PARSERS = [
    (parse_chip_map, ChipMapEntry),
    (partial(parse_usages, npu_id=0), ChipUsages),
    (partial(parse_common, npu_id=0), CommonInfo),
    (partial(parse_memory, npu_id=0), ChipMemory),
    (partial(parse_health, npu_id=0), ChipHealth),
    (partial(parse_ecc, npu_id=0), ChipEcc),
    (partial(parse_board, npu_id=0), BoardInfo),
    (partial(parse_current_fault_event, npu_id=0), ChipFaultEvents),
    (partial(parse_volt, npu_id=0), ChipVoltage),
    (partial(parse_pcie_errors, npu_id=0), ChipPcieErrors),
    (partial(parse_sensors, npu_id=0), ChipSensors),
    (partial(parse_sio, npu_id=0), ChipSio),
    (partial(parse_superpod, npu_id=0, chip_id=1), SuperPod),
    (partial(parse_hccs, npu_id=0, chip_id=1), ChipHccs),
    (partial(parse_hccs_bandwidth, npu_id=0), ChipHccsBandwidth),
    (parse_volt, ChipVoltage),
    (parse_usages, ChipUsages),  # without npu_id: a missing NPU ID must still be an NpuSmiError
    (parse_health, ChipHealth),
    (parse_current_fault_event, ChipFaultEvents),
]
IDS = [getattr(p, "func", p).__name__ + ("(npu_id)" if isinstance(p, partial) else "") for p, _ in PARSERS]

# Fragments that steer mutations towards the structure the parsers look for.
FRAGMENTS = st.sampled_from(
    [
        "\n",
        "\t",
        " : ",
        ":",
        "-",
        "NA",
        "N/A",
        "Failed",
        "0",
        "65536",
        "99.7",
        "-1",
        "1" * 40,
        "0x57",
        "\tNPU ID                         : 0\n",
        "\tChip ID                        : 1\n",
        "Chip Count : 2\n",
        "Chip Name : mcu\n",
        "Error Information : x\n",
        "\t                               : more\n",
        "Process id:1 Process name: Process memory(MB):",
        "No process in device.\n",
        "NPU ID  Chip ID  Chip Name\n",
        "LM75A_TE (C) : ",
        "Temperature(C) : ",
        "ret is -8005",
        "Total Count : 3\n",
        "Fault Event Count : 2\n",
        "Fault Event Information : event id=0x81AF8000, severity=2\n",
        "event id=",
        "Voltage(V) : ",
        "hccs tx packets : [1 2 ",
        "]\n",
        "hccs health status : NOK\n",
        "hccs link  tx_bandwidth(GB/S)  rx_bandwidth(GB/S)\n",
        "total 1.0 2.0\n",
    ]
)
INSERT = st.one_of(FRAGMENTS, st.text(max_size=12))


@st.composite
def mutated_samples(draw: st.DrawFn) -> str:
    """A real sample, cut, spliced, duplicated or sprinkled with fragments."""
    text = draw(st.sampled_from(SAMPLES))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, len(text)))
        op = draw(st.sampled_from(["truncate", "delete", "insert", "repeat", "swap-lines"]))
        if op == "truncate":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(INSERT) + text[i:]
        elif op == "repeat":
            text = text[:j] + text[i:j] + text[j:]
        else:
            lines = text.splitlines(keepends=True)
            draw(st.randoms(use_true_random=False)).shuffle(lines)
            text = "".join(lines)
    return text


def check(parser, record_type, text: str) -> None:
    try:
        result = parser(text)
    except NpuSmiError as error:
        assert error.reason
        return
    records = result if isinstance(result, tuple) else (result,)
    assert all(isinstance(record, record_type) for record in records)


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("parser", "record_type"), PARSERS, ids=IDS)
@SETTINGS
@given(text=st.text(max_size=300))
def test_arbitrary_text_only_raises_npusmi_error(parser, record_type, text):
    check(parser, record_type, text)


@pytest.mark.parametrize(("parser", "record_type"), PARSERS, ids=IDS)
@SETTINGS
@given(text=mutated_samples())
def test_mutated_samples_only_raise_npusmi_error(parser, record_type, text):
    check(parser, record_type, text)
