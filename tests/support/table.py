"""What tests read of the source table (node/sources.py through app/settings.TABLE)."""

from __future__ import annotations

from exporter.app.settings import TABLE
from exporter.npusmi.part import DEVICES


def chip_switches() -> tuple[str, ...]:
    """Every collector.* switch whose source is the chips or reads them (registration ``needs``):
    npu-smi runs while any of them is on."""
    readers = [r for r in TABLE if r.name == DEVICES.name or DEVICES.name in r.needs]
    return tuple(dict.fromkeys(c.switch for r in readers for c in r.collectors))
