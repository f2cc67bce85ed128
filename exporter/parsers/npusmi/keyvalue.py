"""Parsers for npu-smi's key/value outputs: `info -m`, `info -l`, `info -t <type>`."""

from __future__ import annotations

from exporter.parsers.npusmi.records import NpuSmiError


def _todo(*_args, **_kwargs):
    raise NpuSmiError("garbled", "not implemented yet")


parse_board = parse_card_list = parse_chip_map = parse_common = parse_ecc = _todo
parse_health = parse_memory = parse_power = parse_proc_mem = parse_temp = parse_usages = _todo
