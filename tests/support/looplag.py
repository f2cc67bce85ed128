"""How long the event loop was held, measured so that a busy machine cannot fail a test.

A ticker on the loop wakes every ``TICK`` seconds. Between two ticks the loop ran whatever else
was ready; if that work held it, the gap grows. A wall-clock gap also grows when the machine is
busy and the process simply was not scheduled, which says nothing about our code. So each gap
is charged with CPU time, which only accrues while something of ours runs:

- ``loop_cpu``: the CPU time of the loop's own thread between two ticks (a regex over a large
  header, a big synchronous parse on the loop);
- ``process_cpu``: the CPU time of the whole process between two ticks, capped at the wall gap
  (a worker thread holding the GIL in one long C call, such as ``json.loads`` of a large file,
  stops the loop while the process burns a core).

Use :func:`measure` around the attack; ``worst_loop_cpu`` and ``worst_process_cpu`` are the
worst gaps, in seconds.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

TICK = 0.005
STALL_LIMIT = 0.1  # what the hostile-input suite allows: the loop is never held longer


@dataclass
class LoopLag:
    ticks: int = 0
    worst_wall: float = 0.0  # for the message only: never asserted on
    worst_loop_cpu: float = 0.0
    worst_process_cpu: float = 0.0
    gaps: list[tuple[float, float, float]] = field(default_factory=list)  # the 5 worst (wall, loop cpu, process cpu)

    def record(self, wall: float, loop_cpu: float, process_cpu: float) -> None:
        self.ticks += 1
        process_cpu = min(process_cpu, wall)
        self.worst_wall = max(self.worst_wall, wall)
        self.worst_loop_cpu = max(self.worst_loop_cpu, loop_cpu)
        self.worst_process_cpu = max(self.worst_process_cpu, process_cpu)
        self.gaps = sorted([*self.gaps, (wall, loop_cpu, process_cpu)], key=lambda g: -max(g[1], g[2]))[:5]

    def assert_never_held(self, limit: float = STALL_LIMIT, *, threads: bool = False) -> None:
        """The loop's thread never ran one gap's work for ``limit``; with ``threads``, neither did
        the whole process (use it where no other thread legitimately runs in parallel)."""
        assert self.ticks > 0, "the ticker never ran: the loop was held for the whole measurement"
        worst = self.worst_process_cpu if threads else self.worst_loop_cpu
        assert worst < limit, (
            f"event loop held {worst * 1000:.0f} ms (limit {limit * 1000:.0f} ms); worst gaps (wall, loop cpu, process cpu): {self.gaps}"
        )


@asynccontextmanager
async def measure() -> AsyncIterator[LoopLag]:
    """Tick on the running loop while the body runs; the result is complete after the block."""
    lag = LoopLag()
    stop, started = asyncio.Event(), asyncio.Event()
    # The test process holds every module the suite imported (torch among them): a full garbage
    # collection of that heap stalls any loop for most of a second. It is not the exporter's heap,
    # and serve freezes its own start-up objects (core/heap.py): frozen here the same way, so the
    # collections measured are those of what the body allocates.
    gc.collect()
    gc.freeze()

    async def tick() -> None:
        wall, loop_cpu, process_cpu = time.perf_counter(), time.thread_time(), time.process_time()
        started.set()
        while not stop.is_set():
            await asyncio.sleep(TICK)
            now, now_loop, now_process = time.perf_counter(), time.thread_time(), time.process_time()
            lag.record(now - wall - TICK, now_loop - loop_cpu, now_process - process_cpu)
            wall, loop_cpu, process_cpu = now, now_loop, now_process

    ticker = asyncio.create_task(tick())
    await started.wait()  # the first reading is taken before the body starts anything
    try:
        yield lag
    finally:
        stop.set()
        await ticker
        gc.unfreeze()
