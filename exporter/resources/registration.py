"""The exporter's own process: CPU, memory, open files and the cgroup's memory limit, under
`collector.self` (declared with the exporter's status, node/status.py)."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration
from exporter.core.source import Sampled, Source
from exporter.resources.collector import ResourcesCollector
from exporter.resources.part import RESOURCES
from exporter.resources.source import ResourcesSource


def build(b: Build[None]) -> Source | None:
    return Sampled(RESOURCES.name, ResourcesSource()) if b.on("self") else None


REGISTRATION: Registration[None] = Registration(RESOURCES, build, (Collect("self", ResourcesCollector),))
