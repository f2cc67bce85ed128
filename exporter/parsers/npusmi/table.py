"""Parser for the `npu-smi info` overview table (device rows and process section)."""

from __future__ import annotations

from exporter.parsers.npusmi.records import InfoTable, NpuSmiError


def parse_info(text: str) -> InfoTable:
    raise NpuSmiError("garbled", "parse_info not implemented yet")
