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
from exporter.npusmi.parse.inventory import parse_board, parse_chip_map
from exporter.npusmi.parse.records import (
    BoardInfo,
    ChipCommon,
    ChipEcc,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipUsages,
    CommonInfo,
    InfoChip,
    InfoProcess,
    InfoTable,
    NpuSmiError,
)
from exporter.npusmi.parse.table import parse_info

__all__ = [
    "BoardInfo",
    "ChipCommon",
    "ChipEcc",
    "ChipFaultEvents",
    "ChipHealth",
    "ChipMapEntry",
    "ChipMemory",
    "ChipUsages",
    "CommonInfo",
    "FaultEvent",
    "InfoChip",
    "InfoProcess",
    "InfoTable",
    "NpuSmiError",
    "check_output",
    "detect_error",
    "parse_board",
    "parse_chip_map",
    "parse_common",
    "parse_current_fault_event",
    "parse_ecc",
    "parse_health",
    "parse_info",
    "parse_memory",
    "parse_usages",
]
