"""Runs the sources on their own intervals and publishes a fresh immutable snapshot after each run."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from exporter.snapshot import DevicesPart, Snapshot
from exporter.sources.health import Failure, HealthRegistry

log = logging.getLogger("exporter.sampler")


@dataclass(frozen=True)
class Task:
    name: str
    interval: float
    run: Callable[[], Awaitable[None]]


class SnapshotStore:
    """Holds the latest snapshot; replacing the reference is the only mutation."""

    def __init__(self) -> None:
        self.current = Snapshot(captured_at=0.0)


class Sampler:
    def __init__(
        self,
        tasks: list[Task],
        devices: Callable[[], DevicesPart],
        health: HealthRegistry,
        store: SnapshotStore,
        simulated: tuple[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        profiles: Callable[[], tuple] = tuple,
        network: Callable[[], tuple] = tuple,
    ) -> None:
        self.tasks = tasks
        self.devices = devices
        self.profiles = profiles
        self.network = network
        self.health = health
        self.store = store
        self.simulated = simulated
        self.clock = clock
        self._done: set[str] = set()

    async def run_once(self) -> Snapshot:
        """Every task once, in order (the `once` command and tests)."""
        for task in self.tasks:
            await self._run(task)
        return self.store.current

    async def run_forever(self) -> None:
        """One loop per task; the first round runs in order so the first snapshot is complete."""
        await self.run_once()
        await asyncio.gather(*(self._loop(task) for task in self.tasks))

    async def _loop(self, task: Task) -> None:
        next_at = time.monotonic() + task.interval
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            await self._run(task)
            # Fixed rate; a run longer than the interval skips ahead instead of bunching up.
            next_at += task.interval
            now = time.monotonic()
            if next_at < now:
                next_at = now + task.interval

    async def _run(self, task: Task) -> None:
        start = time.monotonic()
        try:
            await task.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in a source must not stop sampling
            log.exception("source crashed", extra={"source": task.name})
            self.health[task.name].record(time.monotonic() - start, [Failure(task.name, "internal", repr(exc))])
        self._done.add(task.name)
        self.publish()

    def publish(self) -> None:
        self.store.current = Snapshot(
            captured_at=self.clock(),
            devices=self.devices(),
            sources=self.health.statuses(),
            ready=self._done >= {t.name for t in self.tasks[:1]},
            simulated=self.simulated,
            profiles=self.profiles(),
            network=self.network(),
        )
