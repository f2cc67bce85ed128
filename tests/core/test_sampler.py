"""The sampler: tasks in order first, then each on its own; a stalled task does not stop the snapshot
from being rebuilt (and so from ageing out what it read last)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from exporter.core.health import HealthRegistry
from exporter.core.sampler import Sampler, Task


async def test_first_round_in_order_and_readiness():
    ran: list[str] = []
    published: list[bool] = []

    def task(name: str) -> Task:
        async def run() -> None:
            ran.append(name)
        return Task(name, 3600.0, run)

    sampler = Sampler([task("first"), task("second")], HealthRegistry(), published.append)
    assert not sampler.ready
    await sampler.run_once()
    assert ran == ["first", "second"] and published == [True, True] and sampler.ready


async def test_a_stalled_task_does_not_stop_republishing():
    stuck = asyncio.Event()
    published: list[float] = []

    async def hang() -> None:
        stuck.set()
        await asyncio.Event().wait()   # never returns: a wedged source

    sampler = Sampler([Task("quick", 3600.0, asyncio.sleep), Task("wedged", 3600.0, hang)], HealthRegistry(),
                      lambda ready: published.append(time.monotonic()), republish_interval=0.05)
    runner = asyncio.create_task(sampler.run_forever())
    try:
        await asyncio.wait_for(stuck.wait(), 5)
        before = len(published)
        deadline = time.monotonic() + 10
        while len(published) < before + 3 and time.monotonic() < deadline:   # bounded poll
            await asyncio.sleep(0.02)
        assert len(published) >= before + 3
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


async def test_a_crashing_task_is_counted_and_sampling_goes_on():
    async def crash() -> None:
        raise RuntimeError("bug")

    health = HealthRegistry()
    published: list[bool] = []
    sampler = Sampler([Task("buggy", 3600.0, crash)], health, published.append)
    await sampler.run_once()
    (status,) = health.statuses()
    assert (status.name, status.success, dict(status.errors)) == ("buggy", False, {"internal": 1})
    assert published == [True]
