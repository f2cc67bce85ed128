"""Runs every source's tasks on their own intervals and publishes after each run.

A task is one scheduled piece of a source's work (``npu-smi info`` every 10 s, the per-card
details every 60 s, a kubelet call every 15 s ...). After each run the sampler calls
``publish(ready)``, which builds a fresh immutable snapshot from every source's part; a
scrape never waits on a task. ``ready`` turns true once the first task has run.

Parts leave out data older than its max age when they are built, so the sampler also
publishes on its own when no task has for ``republish_interval`` seconds: a task that stalls
(a source bug, a wedged call) cannot keep its last readings on /metrics past their age.

A run still going after its task's ``overdue`` time (a worker thread stuck in a read) is
recorded as a failure (reason ``overdue``): `cann_exporter_source_success` turns 0 and the
last-success time stops, rather than the previous run's success standing for ever. The run is
left to finish (a thread cannot be interrupted); no second run of the task starts meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from exporter.core.health import Failure, HealthRegistry

log = logging.getLogger("exporter.sampler")


# A run is overdue after this many intervals, and never before OVERDUE_MIN seconds: npu-smi
# calls have their own timeouts, and a big profile export can take tens of seconds to parse.
OVERDUE_INTERVALS = 3
OVERDUE_MIN = 60.0
RECHECK_SECONDS = 1.0  # how long a task waits before it reads its interval again (a reload may change it)


@dataclass(frozen=True)
class Task:
    name: str
    interval: float
    run: Callable[[], Awaitable[None]]
    overdue: float | None = None  # seconds; None: OVERDUE_INTERVALS x interval, at least OVERDUE_MIN
    period: Callable[[], float] | None = None  # the interval as of now, where a reload can change it
    complete: Callable[[], bool] | None = None  # the first task: its source has all readiness waits for
    # Starts at once on its own schedule instead of after the first runs of the tasks before it:
    # for a task that shares no tool with them (the profile scan runs no npu-smi, so it does not
    # wait minutes behind the npu-smi detail rounds of a big node).
    own_schedule: bool = False

    @property
    def every(self) -> float:
        """The interval in force: read before each wait, so a reloaded value applies from the next run."""
        return self.period() if self.period is not None else self.interval

    @property
    def overdue_after(self) -> float:
        return self.overdue if self.overdue is not None else max(OVERDUE_MIN, OVERDUE_INTERVALS * self.every)


class Sampler:
    def __init__(
        self,
        tasks: Sequence[Task],
        health: HealthRegistry,
        publish: Callable[[bool], None],
        republish_interval: float = 1.0,
    ) -> None:
        """``publish(ready)`` hands the snapshot on and returns at once: the sampler never waits
        for what is made of it (the bodies are encoded downstream, node/publisher.py)."""
        self.tasks = list(tasks)
        self.health = health
        self.republish_interval = republish_interval
        self._publish = publish
        self._done: set[str] = set()
        self._published_at = -float("inf")

    @property
    def ready(self) -> bool:
        """The first task (npu-smi's overview) has run at least once, and its source says its
        sample is complete (every chip listed is served: its device id is known)."""
        if not self.tasks:
            return True
        first = self.tasks[0]
        return first.name in self._done and (first.complete is None or first.complete())

    async def run_once(self) -> None:
        """Every task once, in order (the `once` command and tests)."""
        for task in self.tasks:
            await self._run(task)

    async def run_forever(self) -> None:
        """One loop per task; the first round runs in order so the first snapshot is complete."""
        await asyncio.gather(self._republish(), self._rounds())

    async def _rounds(self) -> None:
        """Each task's first run waits for the previous task's first run to end or go overdue:
        the first snapshot is complete, and a task stuck from the start holds no other. A task
        on its own schedule (``own_schedule``) starts at once and holds none of the others."""
        previous: asyncio.Event | None = None
        loops = []
        for task in self.tasks:
            if task.own_schedule:
                loops.append(self._loop(task))
                continue
            settled = asyncio.Event()
            loops.append(self._loop(task, previous, settled))
            previous = settled
        await asyncio.gather(*loops)

    async def _republish(self) -> None:
        while True:
            await asyncio.sleep(self.republish_interval)
            if time.monotonic() - self._published_at < self.republish_interval:
                continue  # a task run published meanwhile
            try:
                self.publish()
            except Exception:  # a bug in building a part must not stop the ageing of the others
                log.exception("publishing the snapshot failed")

    async def _loop(self, task: Task, after: asyncio.Event | None = None, settled: asyncio.Event | None = None) -> None:
        if after is not None:
            await after.wait()
        await self._run(task, settled)
        due_from = time.monotonic()  # the next run is due one interval after this
        while True:
            # Woken at least every RECHECK_SECONDS, so an interval a reload changed counts at once.
            while (left := due_from + task.every - time.monotonic()) > 0:
                await asyncio.sleep(min(left, RECHECK_SECONDS))
            due_from += task.every
            await self._run(task)
            # Fixed rate; a run longer than the interval skips ahead instead of bunching up.
            if due_from + task.every < time.monotonic():
                due_from = time.monotonic()

    async def _run(self, task: Task, settled: asyncio.Event | None = None) -> None:
        """One run; ``settled`` is set when it ends or goes overdue, whichever is first."""
        start = time.monotonic()
        run: asyncio.Future[None] | None = None
        try:
            run = asyncio.ensure_future(task.run())
            done, _ = await asyncio.wait({run}, timeout=task.overdue_after)
            if not done:
                message = f"still running after {task.overdue_after:g}s (a worker stuck in a read?)"
                self.health[task.name].record(time.monotonic() - start, [Failure(task.name, "overdue", message)])
                self.publish()
                if settled is not None:
                    settled.set()
                await run
            run.result()
        except asyncio.CancelledError:
            if run is not None:
                run.cancel()
            raise
        except Exception as exc:  # a bug in a source must not stop sampling
            log.exception("source crashed", extra={"source": task.name})
            self.health[task.name].record(time.monotonic() - start, [Failure(task.name, "internal", repr(exc))])
        finally:
            if settled is not None:
                settled.set()
        self._done.add(task.name)
        self.publish()

    def publish(self) -> None:
        """Publish now (for a change outside the sampler's runs, e.g. a posted profile)."""
        self._published_at = time.monotonic()
        self._publish(self.ready)
