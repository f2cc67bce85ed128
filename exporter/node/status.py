"""The exporter's status (`collector.self`): every source's health, whether it runs on the
simulator, and the chips withheld (stale, or their device id not known yet). It reads the health of every source and the chips'
part, so it is the node's own registration, not a source package's."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.selfmetrics import SOURCE_NOTE, STATUS, StatusCollector, StatusPart
from exporter.core.snapshot import Snapshot
from exporter.core.source import Derived, Source
from exporter.npusmi.part import DEVICES, DevicesPart


def build(b: Build[None]) -> Source:
    def make(earlier: Snapshot) -> StatusPart:
        devices = earlier.get(DEVICES) or DevicesPart()
        return StatusPart(b.health.statuses(), b.simulated, devices.stale_chips, devices.pending_chips)

    return Derived(STATUS.name, make)


def describe(b: Build[None], source: Source | None) -> str:
    return "the exporter's own metrics"


REGISTRATION: Registration[None] = Registration(
    STATUS,
    build,
    (Collect("self", StatusCollector),),
    switches=(Switch("self", "the exporter's own metrics: source health, build, web, process and Python runtime"),),
    describe=describe,
    notes=(SOURCE_NOTE,),
)
