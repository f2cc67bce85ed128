"""`cann-exporter once`: one collection, the exposition text on stdout; exit 1 if npu-smi ran
and no chip was read. Its one profile scan reports every finished export (marker present, or
settled): `serve` waits for a second identical scan, `once` has only the one."""

from __future__ import annotations

import asyncio
import sys

from prometheus_client import generate_latest

from exporter.app.settings import Settings
from exporter.core.errors import EXIT_FAILURE, EXIT_OK
from exporter.node.assembly import assemble
from exporter.npusmi.part import DEVICES
from exporter.npusmi.source import NpuSmiSource


def run(settings: Settings) -> int:
    node = assemble(settings, ingest=False, single_scan=True)
    asyncio.run(node.sampler.run_once())
    sys.stdout.write(generate_latest(node.registry).decode())
    ran_npu_smi = node.source(NpuSmiSource) is not None  # sampled: some collector reads the chips
    devices = node.publisher.current.get(DEVICES)
    if ran_npu_smi and not (devices and any(chip.up for chip in devices.chips)):
        print("cann-exporter: no chip could be read", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
