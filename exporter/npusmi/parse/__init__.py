"""Pure parsers for npu-smi text: text in, typed records out (records.py).

Every parser raises only :class:`NpuSmiError`; columns and keys are found by their printed
names, never by offset. The formats are described in docs/formats/npu-smi.md.
"""

from exporter.npusmi.parse.details import (
    parse_common,
    parse_ecc,
    parse_health,
    parse_memory,
    parse_usages,
)
from exporter.npusmi.parse.errors import check_output, detect_error
from exporter.npusmi.parse.faultevents import ChipFaultEvents, FaultEvent, parse_current_fault_event
from exporter.npusmi.parse.hardware import parse_pcie_errors, parse_sensors, parse_sio, parse_superpod, parse_volt
from exporter.npusmi.parse.hccs import parse_hccs, parse_hccs_bandwidth
from exporter.npusmi.parse.inventory import parse_board, parse_chip_map
from exporter.npusmi.parse.records import (
    BoardInfo,
    ChipCommon,
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
    HccsLink,
    InfoChip,
    InfoProcess,
    InfoTable,
    NpuSmiError,
    SuperPod,
)
from exporter.npusmi.parse.table import parse_info

__all__ = [
    "BoardInfo",
    "ChipCommon",
    "ChipEcc",
    "ChipFaultEvents",
    "ChipHccs",
    "ChipHccsBandwidth",
    "ChipHealth",
    "ChipMapEntry",
    "ChipMemory",
    "ChipPcieErrors",
    "ChipSensors",
    "ChipSio",
    "ChipUsages",
    "ChipVoltage",
    "CommonInfo",
    "FaultEvent",
    "HccsLink",
    "InfoChip",
    "InfoProcess",
    "InfoTable",
    "NpuSmiError",
    "SuperPod",
    "check_output",
    "detect_error",
    "parse_board",
    "parse_chip_map",
    "parse_common",
    "parse_current_fault_event",
    "parse_ecc",
    "parse_hccs",
    "parse_hccs_bandwidth",
    "parse_health",
    "parse_info",
    "parse_memory",
    "parse_pcie_errors",
    "parse_sensors",
    "parse_sio",
    "parse_superpod",
    "parse_usages",
    "parse_volt",
]
