"""The sender: a daemon thread that batches the buffered steps and POSTs them to the exporter.

The training thread only appends to ``buf`` (a step inline, everything else through
:meth:`Sender.put`). The thread turns events into the ingest API's JSON, POSTs them under one
deadline, keeps what surely did not arrive for a retry, backs off while the exporter is away
(dropping and counting what does not fit), sends a heartbeat while the loop is quiet and the
final message at close. Nothing here raises into the training loop.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from time import perf_counter as _perf
from typing import Any, Protocol

from exporter.hooks.identity import Identity
from exporter.hooks.transport import NotSent, Transport, redacted
from exporter.hooks.wire import MAX_PHASE_NAMES, OUTSIDE, Event, count_value, outside_json, step_json

log = logging.getLogger("exporter.hooks")


class Owner(Protocol):
    """The monitor, as the sender reads it at each use: its settings (the sender halves
    ``batch_size`` when the exporter finds a batch too large) and what it says of itself with
    every batch, which may change meanwhile (a fork child's pid, FLOPs measured at the first
    step, profiling windows started later)."""

    url: str
    batch_size: int
    flush_interval: float
    heartbeat_interval: float
    timeout: float
    max_backoff: float
    identity: Identity
    precision: str
    flops_per_step: float | None
    # Seconds the training thread spent in profiling windows (TorchMonitor sets it), sent
    # with each batch and served as npu_job_profiling_overhead_seconds_total.
    profiling_seconds: Callable[[], float] | None


class Sender:
    def __init__(self, owner: Owner, token: str | None, buffer_size: int, enabled: bool) -> None:
        self._owner = owner
        self._token = token
        self._buffer_size = max(1, buffer_size)
        self.closed = not enabled  # a disabled monitor's sender never starts
        self._finished = True  # close() after a crash clears it: no final message then
        self._owner_pid = os.getpid()  # a fork child never sends the final message
        self.reset()

    def reset(self) -> None:
        """Fresh state, at creation and in a fork child: nothing the parent buffered is sent
        twice, and no lock the parent's thread held is waited on."""
        # This process's claim on its job_name and rank: the exporter refuses a second live
        # process with the same pair, and starts fresh counters for a new one after a finish.
        self.session = os.urandom(8).hex()
        self.buf: deque[Event] = deque()
        self.capacity = 0  # what the loop may buffer: 0 until the thread runs, and once closed
        self.wake_at = self._owner.batch_size  # a full batch wakes the thread at once
        self.wake = threading.Event()
        self.dropped = 0  # written by the training thread only (buffer full, or closed)
        self._send_dropped = 0  # written by the sender thread only
        self._dropped_acked = 0  # dropped counts the exporter has been told about
        self._sent = 0
        self._send_errors = 0
        self._last_error: str | None = None  # only while sends fail
        self._last_failure: tuple[str, float] | None = None  # the latest failure and its unix time, kept
        self._unknown_phases: dict[str, int] = {}  # names the exporter does not know -> steps
        self.memory: tuple[int | None, int | None] | None = None  # the allocator's, sent when changed
        self._memory_sent: tuple[int | None, int | None] | None = None
        # encoded steps, and phases run between them, awaiting a retry
        self._pending: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
        self._newest_taken = float("-inf")  # perf time of the newest event the thread took
        self._busy = False
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self._running = False
        self._transport: Transport | None = None
        self._failing = False
        self._backoff = 0.0
        self._last_post = 0.0

    # --- the training thread ---------------------------------------------------------------
    def put(self, event: Event) -> None:
        """Buffer one event: the way in of record_step and of a step the inline append cannot
        take (the thread not started yet, or the buffer full: the event is counted, dropped)."""
        if not self._running:
            self._start()
        buf = self.buf
        n = len(buf)
        if n >= self.capacity:
            self.dropped += 1
            return
        buf.append(event)
        if n == self.wake_at:
            self.wake.set()

    def _start(self) -> None:
        if self._running or self.closed:
            return
        self._running = True
        self.capacity = self._buffer_size  # before the thread runs: a bad URL sets it back to 0
        try:
            self.thread = threading.Thread(target=self._run, name="cann-exporter-hooks", daemon=True)
            self.thread.start()
        except Exception as exc:  # e.g. interpreter shutting down: stay silent and inert
            self.capacity = 0
            self._last_error = f"cannot start sender: {exc}"

    def flush(self, timeout: float = 5.0) -> bool:
        """Ask the thread to send what is buffered now; True when the buffer emptied in time."""
        if self.thread is None:
            return not self.buf
        self.wake.set()
        deadline = time.monotonic() + timeout
        while self._unsent() and time.monotonic() < deadline and self.thread.is_alive():
            time.sleep(0.005)
        return not self._unsent()

    def _unsent(self) -> bool:
        return bool(self.buf or self._pending or self._busy)

    def close(self, timeout: float, finished: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self._finished = finished
        self.capacity = 0
        thread = self.thread
        if thread is not None and thread.is_alive():
            self._stop.set()
            self.wake.set()
            thread.join(timeout)

    def newest_event(self) -> float:
        """perf_counter time of the newest step buffered or taken (-inf before the first)."""
        buf = self.buf
        newest = buf[-1][0] if buf else float("-inf")  # read before _newest_taken: see _take
        return max(newest, self._newest_taken)

    def stats(self) -> dict[str, Any]:
        failure, failed_at = self._last_failure or (None, None)
        return {
            "sent": self._sent,
            "dropped": self.dropped + self._send_dropped,
            "buffered": len(self.buf) + (len(self._pending[0]) if self._pending else 0),
            "send_errors": self._send_errors,
            "last_error": self._last_error,
            "last_failure": failure,
            "last_failure_time": failed_at,
            "unknown_phases": dict(self._unknown_phases),
        }

    # --- the sender thread ------------------------------------------------------------------
    def _run(self) -> None:
        owner = self._owner
        try:
            transport = self._transport = Transport(owner.url, self._token, owner.timeout)
        except ValueError as exc:
            log.warning("cann-exporter hooks disabled: %s", exc)
            self.capacity = 0
            return
        while True:
            if self._failing:
                self._stop.wait(self._backoff)
            else:
                self.wake.wait(owner.flush_interval)
                self.wake.clear()
            if self._stop.is_set():
                break
            try:
                self._flush_once(final=False)
            except Exception as exc:  # a bug here must not kill reporting for good
                self._note_failure(f"internal error: {exc!r}")
        try:
            self._flush_once(final=True)
        except Exception as exc:
            self._last_error = f"final flush: {exc!r}"
        transport.close()

    def _flush_once(self, final: bool) -> None:
        """Send everything buffered now, in batches; stop at the first failure."""
        self._busy = True
        try:
            self._drain(final)
        finally:
            self._busy = False

    def _drain(self, final: bool) -> None:
        # A fork child never marks the job finished, nor does a process dying of an exception.
        may_finish = self._owner_pid == os.getpid() and self._finished
        budget = len(self.buf) + self._owner.batch_size  # bounded even if the loop outruns us
        sent_any = sent_final = False
        while budget > 0 and (self._pending or self.buf):
            if self._pending is None:
                taken = self._take(self._owner.batch_size)
                budget -= len(taken)
                steps, outside = self._steps_json(taken)
                if not steps and not outside:
                    continue
                self._pending = (steps, outside)
            last = final and may_finish and not self.buf
            if not self._send(self._pending[0], final=last, outside=self._pending[1]):
                return
            self._pending = None
            sent_any, sent_final = True, last
        if final and may_finish and not sent_final:
            self._send([], final=True)
        elif not sent_any and time.monotonic() - self._last_post >= self._owner.heartbeat_interval:
            self._send([], final=False)  # keeps a stuck-but-alive rank visible (stall alerts)

    def _take(self, count: int) -> list[Event]:
        buf, out = self.buf, []
        popleft = buf.popleft
        count = min(count, len(buf))
        if count:  # noted before the events leave the buffer, so newest_event() never misses one
            self._newest_taken = max(self._newest_taken, buf[count - 1][0])
        for _ in range(count):
            out.append(popleft())
        return out

    def _steps_json(self, events: list[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The API's steps, and phases run outside any step, of buffered events."""
        offset = time.time() - _perf()  # perf_counter -> unix time, fresh for every batch
        declared = self._owner.flops_per_step
        steps, outside, unusable = [], [], 0
        for e in events:
            if e[2] is OUTSIDE:
                entry = outside_json(e, offset)
                if entry is not None:
                    outside.append(entry)
                continue
            step = step_json(e, offset, declared)
            if step is None:
                unusable += 1  # unusable values (NaN, negative, ...)
            else:
                steps.append(step)
        self._send_dropped += unusable
        return steps, outside

    def _send(self, steps: list[dict[str, Any]], final: bool, outside: list[dict[str, Any]] | None = None) -> bool:
        """POST one batch. On failure a batch that surely did not arrive stays pending."""
        body, dropped = self._encode(steps, final, outside)
        assert self._transport is not None
        owner = self._owner
        self._last_post = time.monotonic()
        try:
            reply = self._transport.post(body)
        except NotSent as exc:
            self._note_failure(f"exporter unreachable at {redacted(owner.url)}: {exc}")
            return False
        except Exception as exc:  # timeout or reset mid-request: the batch may or may not have landed
            self._give_up(steps)
            self._note_failure(f"sending to {redacted(owner.url)} failed: {exc!r}")
            return False
        if reply.status == 200:
            self._sent += len(steps)
            self._dropped_acked += dropped
            self._memory_sent = self.memory
            self._note_success()
            if b"unknown_phases" in reply.body:
                self._note_unknown_phases(reply.body)
            return True
        message = f"exporter rejected a batch ({reply.status}): {reply.body[:300].decode(errors='replace')}"
        if reply.status == 409:  # another live process holds this job_name and rank: retry, it may be gone
            self._note_failure(message)
            return False
        self._give_up(steps)
        if reply.status == 413 and owner.batch_size > 1:
            owner.batch_size = max(1, owner.batch_size // 2)
        self._note_failure(message)
        return False

    def _note_unknown_phases(self, body: bytes) -> None:
        """Phase names the exporter served as "other": each logged once, counted in stats()."""
        try:
            names = json.loads(body).get("unknown_phases")
            items = [(str(name), int(steps)) for name, steps in names.items()]
        except Exception:
            return
        for name, steps in items:
            known = self._unknown_phases
            if name in known:
                known[name] += steps
            elif len(known) < MAX_PHASE_NAMES:
                known[name] = steps
                log.warning(
                    "cann-exporter hooks: phase %r is not in the exporter's phase vocabulary: served as 'other' "
                    "(use a stage name or a listed word, see docs/training-hooks.md)",
                    name,
                )

    def _give_up(self, steps: list[dict[str, Any]]) -> None:
        self._send_dropped += len(steps)
        if self._pending is not None and self._pending[0] is steps:
            self._pending = None

    def _encode(self, steps: list[dict[str, Any]], final: bool, outside: list[dict[str, Any]] | None = None) -> tuple[bytes, int]:
        dropped = max(0, self.dropped + self._send_dropped - self._dropped_acked)
        owner = self._owner
        ident = owner.identity
        doc: dict[str, Any] = {
            "job_name": ident.job_name,
            "rank": ident.rank,
            "world_size": ident.world_size,
            "framework": ident.framework,
            "pid": ident.pid,
            "session": self.session,
            "dropped": dropped,
            "steps": steps,
        }
        if outside:
            doc["outside"] = outside
        if ident.started is not None:
            doc["started"] = round(ident.started, 3)
        if ident.proc is not None:
            doc["proc"] = ident.proc
        if ident.device is not None:
            doc["device"] = ident.device
        if owner.precision != "bf16":
            doc["precision"] = owner.precision
        if owner.profiling_seconds is not None and (seconds := owner.profiling_seconds()) > 0:
            doc["profiling_seconds"] = round(seconds, 6)
        if final:
            doc["final"] = True
        memory = self.memory
        if memory is not None and memory != self._memory_sent:
            counts = zip(("allocated_bytes", "max_allocated_bytes"), (count_value(v, 1 << 50) for v in memory), strict=True)
            clean = {name: count for name, count in counts if count is not None}
            if clean:
                doc["memory"] = clean
        return json.dumps(doc, separators=(",", ":")).encode(), dropped

    def _note_failure(self, message: str) -> None:
        self._send_errors += 1
        self._last_error = message
        self._last_failure = (message, time.time())
        if not self._failing:
            log.warning("cann-exporter hooks: %s; dropping what does not fit and retrying with backoff", message)
        self._failing = True
        base = self._owner.flush_interval if self._backoff == 0 else self._backoff * 2
        self._backoff = min(self._owner.max_backoff, base) * random.uniform(0.8, 1.2)

    def _note_success(self) -> None:
        if self._failing:  # at the failure's level, so a log that said "unreachable" says this too
            log.warning("cann-exporter hooks: exporter reachable again at %s; sending resumed", redacted(self._owner.url))
        self._last_error = None
        self._failing = False
        self._backoff = 0.0
