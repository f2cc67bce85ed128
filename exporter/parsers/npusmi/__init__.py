"""Pure parsers for npu-smi text: text in, typed records out (see records.py).

Every parser raises only :class:`NpuSmiError`; columns are found by header, never by offset.
"""

from exporter.parsers.npusmi.errors import check_output, detect_error
from exporter.parsers.npusmi.keyvalue import (
    parse_board,
    parse_card_list,
    parse_chip_map,
    parse_common,
    parse_ecc,
    parse_health,
    parse_memory,
    parse_power,
    parse_proc_mem,
    parse_temp,
    parse_usages,
)
from exporter.parsers.npusmi.records import (
    BoardInfo,
    CardInfo,
    ChipCommon,
    ChipEcc,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipPower,
    ChipUsages,
    CommonInfo,
    InfoChip,
    InfoProcess,
    InfoTable,
    NpuSmiError,
    ProcMemEntry,
    TempInfo,
    WatchRow,
)
from exporter.parsers.npusmi.table import parse_info
from exporter.parsers.npusmi.watch import WatchParser, parse_watch

__all__ = [
    "BoardInfo", "CardInfo", "ChipCommon", "ChipEcc", "ChipHealth", "ChipMapEntry", "ChipMemory",
    "ChipPower", "ChipUsages", "CommonInfo", "InfoChip", "InfoProcess", "InfoTable", "NpuSmiError",
    "ProcMemEntry", "TempInfo", "WatchParser", "WatchRow", "check_output", "detect_error",
    "parse_board", "parse_card_list", "parse_chip_map", "parse_common", "parse_ecc", "parse_health",
    "parse_info", "parse_memory", "parse_power", "parse_proc_mem", "parse_temp", "parse_usages",
    "parse_watch",
]
