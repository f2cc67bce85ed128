"""The one bounded subprocess runner every command-line source goes through.

npu-smi and hccn_tool can hang for minutes on an unhealthy device, so every call has a
timeout after which the whole process group is killed and reaped, output is capped,
concurrency is bounded, and no shell is ever involved. Calls run in their own process group
but in the exporter's session, and nicer than it: a new session would also be a new
scheduling group (Linux autogroups), worth as much CPU as the whole exporter however nice,
and a round of per-chip calls (one simulated call costs a core for 0.1 s) then starved the
event loop that answers /metrics and the kubelet's probes. An urgent call (the one-second
overview a node's liveness rests on) waits ahead of the others, so a batch of per-card
queries that fills every slot for seconds cannot age it out; with ``reserve_urgent`` one slot
is kept for it, so it never waits for a slow call (hccs-bw blocks for seconds) to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.core.children import use_pidfds
from exporter.core.errors import ReasonError
from exporter.core.options import option, whole_number

_REAP_SECONDS = 5.0  # bound on draining/reaping a killed child (a setsid grandchild could hold a pipe)


# A process group of its own, in our session (see above); Python 3.10 has no process_group
# and pays for a fork instead of a vfork.
OWN_PROCESS_GROUP: dict[str, Any] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


def nice_option(tool: str) -> Any:
    """The `nice` option of a command-line source."""
    return option(
        5,
        whole_number(0, 19),
        f"{tool} calls run this much nicer than the exporter, so a burst of them cannot delay /metrics "
        "or the health probes (0: same priority)",
        metavar="N",
    )


class RunError(ReasonError):
    """A call that produced no usable output."""


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_seconds: float

    @property
    def output(self) -> str:
        """stdout and stderr together: npu-smi prints its errors on either."""
        return self.stdout if not self.stderr else f"{self.stdout}\n{self.stderr}"


class Slots:
    """A counting semaphore whose urgent waiters are served before the others, each kind in
    arrival order. ``reserved`` slots are kept for urgent calls: the others never take the last
    ones, so an urgent call never waits for a slow one to end."""

    def __init__(self, count: int, reserved: int = 0) -> None:
        self.free = count
        self.reserved = max(0, min(reserved, count - 1))  # never every slot: the others must run
        self._waiters: tuple[deque[asyncio.Future[None]], deque[asyncio.Future[None]]] = (deque(), deque())

    @property
    def waiting(self) -> int:
        return sum(not w.done() for queue in self._waiters for w in queue)

    def _takes(self, urgent: bool) -> bool:
        return self.free > (0 if urgent else self.reserved)

    async def acquire(self, urgent: bool = False) -> None:
        ahead = self._waiters[0] if urgent else self._waiters[0] + self._waiters[1]
        if self._takes(urgent) and not any(not w.done() for w in ahead):
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[0 if urgent else 1].append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):  # release() may have dropped it already
                    self._waiters[0 if urgent else 1].remove(waiter)
            raise

    def release(self) -> None:
        self.free += 1
        for urgent, queue in ((True, self._waiters[0]), (False, self._waiters[1])):
            while queue and self._takes(urgent):
                waiter = queue.popleft()
                if not waiter.done():
                    self.free -= 1
                    waiter.set_result(None)  # the slot goes straight to the waiter

    @contextlib.asynccontextmanager
    async def held(self, urgent: bool = False) -> AsyncIterator[None]:
        await self.acquire(urgent)
        try:
            yield
        finally:
            self.release()


class CommandRunner:
    """Runs argv lists with a per-call timeout, an output cap and a concurrency bound."""

    def __init__(
        self,
        timeout: float = 10.0,
        max_concurrency: int = 4,
        max_output_bytes: int = 4 << 20,
        env: dict[str, str] | None = None,
        nice: int = 0,
        reserve_urgent: bool = False,
    ) -> None:
        """``reserve_urgent``: one slot (of two or more) is kept for urgent calls."""
        self.timeout = timeout
        self.nice = nice
        self.max_output_bytes = max_output_bytes
        self.env = env
        self._slots = Slots(max_concurrency, 1 if reserve_urgent else 0)
        use_pidfds()  # no waiter thread per call (children.py)

    async def run(self, argv: Sequence[str], timeout: float | None = None, *, urgent: bool = False) -> RunResult:
        """Run ``argv`` to completion; raise RunError on spawn failure, timeout or oversize output.
        An ``urgent`` call takes the next free slot before any other waiting call."""
        limit = self.timeout if timeout is None else timeout
        async with self._slots.held(urgent):
            start = time.monotonic()
            proc = await self._spawn(argv)
            _lower_priority(proc.pid, self.nice)
            try:
                stdout, stderr = await asyncio.wait_for(self._read_capped(proc), limit)
                returncode = await asyncio.wait_for(proc.wait(), limit)
            except asyncio.TimeoutError:
                await _kill_group(proc)
                raise RunError("timeout", f"{argv[0]} did not finish within {limit:g}s") from None
            except RunError:
                await _kill_group(proc)
                raise
            except BaseException:  # cancellation included: never leave the child behind
                await _kill_group(proc)
                raise
            return RunResult(tuple(argv), returncode, _decode(stdout), _decode(stderr), time.monotonic() - start)

    async def _spawn(self, argv: Sequence[str]) -> asyncio.subprocess.Process:
        if not argv:
            raise RunError("not_found", "empty command")
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                **OWN_PROCESS_GROUP,  # so a timeout kills grandchildren too
                env=self.env,
                limit=min(self.max_output_bytes, 1 << 20),
            )
        except FileNotFoundError:
            raise RunError("not_found", f"{argv[0]}: no such file") from None
        except PermissionError:
            raise RunError("permission_denied", f"{argv[0]}: permission denied") from None
        except OSError as exc:
            raise RunError("spawn_failed", f"{argv[0]}: {exc.strerror or exc}") from None

    async def _read_capped(self, proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
        assert proc.stdout is not None and proc.stderr is not None
        readers = [asyncio.ensure_future(_read_limited(s, self.max_output_bytes)) for s in (proc.stdout, proc.stderr)]
        try:
            out, err = await asyncio.gather(*readers)
            return out, err
        finally:
            # Stop the sibling reader too, so the kill path can drain the pipes alone.
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)


async def _read_limited(stream: asyncio.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        size += len(chunk)
        if size > limit:
            raise RunError("output_too_large", f"output exceeded {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the child's whole process group, drain its pipes and reap it (no zombie).

    asyncio reports the exit only once the pipes reach EOF, and a reader that stopped
    early leaves them paused: draining what is left is what lets wait() return.
    """
    # Also when the leader already exited: children it left in the group may still run.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_drain(stream), _REAP_SECONDS)
    with contextlib.suppress(ProcessLookupError, asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), _REAP_SECONDS)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


def _lower_priority(pid: int, nice: int) -> None:
    """Make a just-started child ``nice`` steps nicer than us. It may have run for a moment at
    our priority (setting it in the child would cost the vfork); it cannot have gone further
    than its own start-up."""
    if nice <= 0:
        return
    with contextlib.suppress(OSError):  # already gone, or a kernel that refuses: it runs as it is
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
