"""bcrypt checks in a few threads of their own, shared fairly between client addresses.

A check is the one piece of work an outsider can order at will, so it is bounded three ways:
``workers`` checks run at once (at a lower CPU priority), an address holds at most
``per_address`` checks queued or running, and the checks waiting are bounded in count and in
bcrypt rounds (those running are bounded by the workers; an address's first check is held by
the count only). When a worker frees, the next check comes from the address served least
recently: a scraper whose credential cache just expired (served minutes ago) goes before
guessers served seconds ago, whatever they queued. When the queue is full, a newcomer takes
the place of the check that would be served last (the newest of the address with the most
waiting, served most recently) if it deserves it more, so nobody can fill the queue either.

The queue lives on the event loop (submit and every change to it run there); the threads only
run bcrypt. ``checks`` and ``pending`` are plain ints a scrape may read from another thread.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from exporter.web.auth import bcrypt_cost

# At most this many bcrypt checks run at once, whatever arrives: the rest of the node keeps
# its cores (exporter-toolkit runs one at a time; two halve the wait behind a queue).
BCRYPT_WORKERS = 2
# ... and at a lower CPU priority (nice +10, Linux: per thread): they get the cycles nobody
# else wants, never those of the event loop, the encoder or the node's training job.
BCRYPT_NICE = 10
# Checks waiting (not running), at most, and their work in bcrypt rounds (2**cost): 16 checks
# of cost 10 per worker, a second or two of waiting; a costlier check is admitted when nothing waits.
BCRYPT_MAX_PENDING = 64
BCRYPT_MAX_WORK = BCRYPT_WORKERS * 16 * 2**10
# Checks one address may have queued or running: its share, not the pool.
BCRYPT_PER_ADDRESS = 4
# Addresses whose last turn is remembered (the least recently served are forgotten first:
# forgetting them changes nothing, they would go first anyway).
_SERVED_SIZE = 4096

Check = Callable[[bytes, bytes], bool]


@dataclass(eq=False)
class _Job:
    address: str
    check: Check
    password: bytes
    hashed: bytes
    work: int
    future: asyncio.Future[bool | None] = field(repr=False)


class BcryptPool:
    """:meth:`submit` queues a check for an address and returns a future of its result (None:
    dropped to make room for a fairer newcomer), or None at once when there is no room."""

    def __init__(
        self,
        workers: int = BCRYPT_WORKERS,
        max_pending: int = BCRYPT_MAX_PENDING,
        max_work: int = BCRYPT_MAX_WORK,
        per_address: int = BCRYPT_PER_ADDRESS,
    ) -> None:
        self.workers, self.max_pending, self.max_work, self.per_address = workers, max_pending, max_work, per_address
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="bcrypt", initializer=_lower_priority)
        self._queues: dict[str, deque[_Job]] = {}
        self._held: dict[str, int] = {}  # address -> checks queued or running
        self._served: dict[str, int] = {}  # address -> turn of its last check started (oldest first)
        self._turn = 0
        self._running = 0
        self._waiting = 0  # queued, not running
        self._work = 0  # of the checks queued
        self.pending = 0  # queued or running
        self.checks = 0  # started so far

    def submit(self, check: Check, password: bytes, hashed: bytes, address: str = "") -> asyncio.Future[bool | None] | None:
        work = 2 ** bcrypt_cost(hashed)
        if self._held.get(address, 0) >= self.per_address:
            return None
        # The work bound holds an address's second check and later; its first waits whatever
        # the work queued (its turn comes before theirs when it was served less recently).
        while self._waiting and (self._waiting >= self.max_pending or (address in self._held and self._work + work > self.max_work)):
            if not self._drop_for(address):
                return None
        job = _Job(address, check, password, hashed, work, asyncio.get_running_loop().create_future())
        job.future.add_done_callback(lambda _: self._forget_if_cancelled(job))
        self._queues.setdefault(address, deque()).append(job)
        self._held[address] = self._held.get(address, 0) + 1
        self.pending += 1
        self._waiting += 1
        self._work += work
        self._dispatch()
        return job.future

    def _drop_for(self, address: str) -> bool:
        """Drop the check that waits to be served last, the newest of the address with the most
        waiting (of those, the one served most recently), if ``address`` deserves its place
        more: it would have fewer waiting, or as many and was served longer ago. False if not."""

        def rank(a: str) -> tuple[int, int]:
            return len(self._queues.get(a, ())), self._served.get(a, -1)

        victim = max(self._queues, key=rank, default=None)
        mine = (len(self._queues.get(address, ())) + 1, self._served.get(address, -1))
        if victim is None or victim == address or rank(victim) <= mine:
            return False
        job = self._queues[victim].pop()
        if not self._queues[victim]:
            del self._queues[victim]
        self._waiting -= 1
        self._work -= job.work
        self._release(job)
        if not job.future.done():
            job.future.set_result(None)
        return True

    def _dispatch(self) -> None:
        while self._running < self.workers and self._queues:
            address = min(self._queues, key=lambda a: self._served.get(a, -1))
            job = self._queues[address].popleft()
            if not self._queues[address]:
                del self._queues[address]
            self._waiting -= 1
            self._work -= job.work
            if job.future.cancelled():  # its caller left before its turn came
                self._release(job)
                continue
            self._running += 1
            self.checks += 1
            self._turn += 1
            self._served.pop(address, None)
            self._served[address] = self._turn
            if len(self._served) > _SERVED_SIZE:
                del self._served[next(iter(self._served))]
            ran = asyncio.wrap_future(self._executor.submit(job.check, job.password, job.hashed))
            ran.add_done_callback(functools.partial(self._finished, job))

    def _finished(self, job: _Job, done: asyncio.Future[bool]) -> None:
        self._running -= 1
        self._release(job)
        if not job.future.done():
            if done.cancelled():
                job.future.set_result(None)
            elif (error := done.exception()) is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(done.result())
        self._dispatch()

    def _forget_if_cancelled(self, job: _Job) -> None:
        """A caller gone while its check waits (the client hung up): its place is freed now."""
        queue = self._queues.get(job.address)
        if job.future.cancelled() and queue is not None and job in queue:
            queue.remove(job)  # at most per_address long
            if not queue:
                del self._queues[job.address]
            self._waiting -= 1
            self._work -= job.work
            self._release(job)

    def _release(self, job: _Job) -> None:
        """The check's place is free (run, dropped or abandoned)."""
        self.pending -= 1
        held = self._held.get(job.address, 1) - 1
        if held:
            self._held[job.address] = held
        else:
            self._held.pop(job.address, None)

    def close(self) -> None:
        """Stop the threads; checks still queued are dropped (their futures cancelled)."""
        for queue in list(self._queues.values()):
            for job in list(queue):
                job.future.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _lower_priority() -> None:
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BCRYPT_NICE))
    except (OSError, AttributeError):  # not Linux, or not allowed: run at the loop's priority
        pass
