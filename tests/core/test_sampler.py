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
        await asyncio.Event().wait()  # never returns: a wedged source

    sampler = Sampler(
        [Task("quick", 3600.0, asyncio.sleep), Task("wedged", 3600.0, hang)],
        HealthRegistry(),
        lambda ready: published.append(time.monotonic()),
        republish_interval=0.05,
    )
    runner = asyncio.create_task(sampler.run_forever())
    try:
        await asyncio.wait_for(stuck.wait(), 5)
        before = len(published)
        deadline = time.monotonic() + 10
        while len(published) < before + 3 and time.monotonic() < deadline:  # bounded poll
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


async def test_an_overdue_run_stops_reporting_success_and_holds_no_other_task():
    """A run stuck past its task's overdue time turns the source's success to 0 (reason
    overdue); the tasks after it in the first round still run, and no second run of the stuck
    task starts; when it ends, its own result counts again."""
    health = HealthRegistry()
    release = asyncio.Event()
    ran: list[str] = []

    async def first() -> None:
        health["first"].record(0.0)

    async def stuck() -> None:
        ran.append("stuck")
        health["stuck"].record(0.0)  # a previous success would otherwise stand for ever
        await release.wait()
        health["stuck"].record(0.0)

    async def after() -> None:
        ran.append("after")

    sampler = Sampler(
        [Task("first", 3600.0, first), Task("stuck", 0.01, stuck, overdue=0.2), Task("after", 3600.0, after)],
        health,
        lambda ready: None,
        republish_interval=0.05,
    )
    runner = asyncio.create_task(sampler.run_forever())
    try:
        deadline = time.monotonic() + 10
        while "after" not in ran and time.monotonic() < deadline:  # bounded poll
            await asyncio.sleep(0.02)
        status = {s.name: s for s in health.statuses()}["stuck"]
        assert "after" in ran and ran.count("stuck") == 1
        assert not status.success and dict(status.errors) == {"overdue": 1}
        release.set()
        while ran.count("stuck") < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert {s.name: s for s in health.statuses()}["stuck"].success
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


def test_overdue_defaults_to_three_intervals_and_at_least_a_minute():
    async def run() -> None:
        return None

    assert Task("npu_smi_info", 10.0, run).overdue_after == 60.0
    assert Task("npu_smi_details", 60.0, run).overdue_after == 180.0
    assert Task("x", 60.0, run, overdue=5.0).overdue_after == 5.0


async def test_a_task_on_its_own_schedule_starts_at_once_and_waits_for_no_other():
    """Issue 45: the profile scan first ran about 2 minutes after start, behind the npu-smi
    detail rounds. A task with own_schedule runs while the first round is held up, on its own
    interval, and the tasks after it still wait for the ones before it."""
    release = asyncio.Event()
    ran: list[str] = []

    async def slow() -> None:
        ran.append("slow")
        await release.wait()

    async def own() -> None:
        ran.append("own")

    async def after() -> None:
        ran.append("after")

    sampler = Sampler(
        [Task("slow", 3600.0, slow), Task("own", 0.05, own, own_schedule=True), Task("after", 3600.0, after)],
        HealthRegistry(),
        lambda ready: None,
    )
    runner = asyncio.create_task(sampler.run_forever())
    try:
        deadline = time.monotonic() + 10
        while ran.count("own") < 3 and time.monotonic() < deadline:  # bounded poll
            await asyncio.sleep(0.02)
        assert ran.count("own") >= 3 and "after" not in ran  # ran, and ran again, while "slow" held the round
        release.set()
        while "after" not in ran and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert "after" in ran
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
