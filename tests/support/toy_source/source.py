"""Reads the toy file off the event loop, bounded, and records each run's health."""

from __future__ import annotations

import asyncio
import time

from exporter.core.errors import ReasonError
from exporter.core.health import Failure, HealthRegistry
from exporter.core.inputfile import read_text_input
from exporter.core.sampler import Task
from exporter.toy.options import ToyOptions
from exporter.toy.part import ToyPart

MAX_BYTES = 4096  # one number


class ToySource:
    name = "toy"

    def __init__(self, options: ToyOptions, health: HealthRegistry) -> None:
        self.options, self.health = options, health
        self._part = ToyPart()

    def tasks(self) -> list[Task]:
        return [Task(self.name, self.options.interval, self.refresh)]

    async def refresh(self) -> None:
        start, failures = time.monotonic(), []
        try:
            text = await asyncio.to_thread(read_text_input, str(self.options.path), MAX_BYTES)
            self._part = ToyPart(float(text.strip()))
        except (ReasonError, ValueError) as exc:
            self._part = ToyPart()
            failures.append(Failure(str(self.options.path), "unreadable", str(exc)))
        self.health[self.name].record(time.monotonic() - start, failures, [str(self.options.path)])

    def part(self) -> ToyPart:
        return self._part
