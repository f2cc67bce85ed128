"""The in-loop client: a few attribute writes per step, everything else on a daemon thread.

The training thread only reads ``perf_counter`` and appends a tuple to a bounded deque
(append and popleft are atomic under the GIL, so no lock is taken on the hot path). A
background thread turns batches into JSON and POSTs them; when the exporter is down or slow
it drops (and counts) what does not fit and retries with backoff. After ``fork()`` the
child starts with an empty buffer and no thread, so nothing is sent twice and no lock
inherited from the parent is ever waited on.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import random
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from time import perf_counter as _perf
from typing import Any, Protocol, TypeVar

from exporter.hooks import env as names
from exporter.hooks.identity import Identity, resolve_identity
from exporter.hooks.transport import NotSent, Transport, redacted
from exporter.hooks.wire import MAX_PHASE_NAME, PRECISIONS, Event, count_value, flops_value, step_json

log = logging.getLogger("exporter.hooks")

DEFAULT_URL = "http://127.0.0.1:9435"
MAX_PHASE_NAMES = 64  # distinct names one monitor sends; beyond, "other"


class _Step:
    """Reused for every step: ``with mon.step(samples=n):`` allocates nothing but the phase dict."""

    __slots__ = ("_mon", "samples", "flops", "_t0")

    def __init__(self, mon: Monitor) -> None:
        self._mon = mon
        self.samples: Any = None
        self.flops: Any = None  # this step's model FLOPs when step(flops=) gave them
        self._t0: float | None = None

    def __enter__(self) -> _Step:
        self._mon._acc = {}
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        t1 = _perf()
        t0, self._t0 = self._t0, None  # so a stray end_step() cannot reuse it
        mon = self._mon
        if exc_type is None:  # a step that raised did not complete
            buf = mon._buf
            n = len(buf)
            if n < mon._capacity:
                if self.flops is None:
                    buf.append((t1, t1 - t0, self.samples, mon._acc))  # type: ignore[operator]
                else:
                    buf.append((t1, t1 - t0, self.samples, mon._acc, None, self.flops))  # type: ignore[operator]
                if n == mon._wake_at:
                    mon._wake.set()
                if not mon._running:
                    mon._start()
            else:
                mon._dropped += 1
        mon._acc = mon._outside  # a phase between steps must not touch the step just buffered
        return False


class _Phase:
    """One per phase name, reused; phases add up within the enclosing step. A phase opened
    inside another counts exclusive time: its time comes out of the enclosing phase's, as
    profilers count self time. A phase re-entered inside itself counts once."""

    __slots__ = ("_mon", "_name", "_t0", "_outer", "_inner", "_depth")

    def __init__(self, mon: Monitor, name: str) -> None:
        self._mon = mon
        self._name = name
        self._t0 = 0.0
        self._outer: _Phase | None = None
        self._inner = 0.0  # seconds of the phases nested in this one
        self._depth = 0

    def __enter__(self) -> _Phase:
        if self._depth:
            self._depth += 1
            return self
        self._depth = 1
        mon = self._mon
        self._outer = mon._open
        mon._open = self
        self._inner = 0.0
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        seconds = _perf() - self._t0
        self._depth -= 1
        if self._depth:
            return False
        mon = self._mon
        outer = mon._open = self._outer
        if outer is not None:
            outer._inner += seconds
        acc = mon._acc
        acc[self._name] = acc.get(self._name, 0.0) + seconds - self._inner
        return False


class _Null:
    """What a disabled monitor hands out."""

    samples: Any = None

    def __enter__(self) -> _Null:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return False


_NULL = _Null()
_MONITORS: weakref.WeakSet[Monitor] = weakref.WeakSet()


class Monitor:
    """Reports training steps of one process (one rank) to the node's exporter.

    >>> mon = Monitor(job_name="bert-large")
    >>> with mon.step(samples=32):
    ...     with mon.phase("h2d"): ...
    ...     with mon.phase("compute"): ...
    >>> mon.close()

    Rank, world size and chip come from RANK/WORLD_SIZE/LOCAL_RANK/ASCEND_RT_VISIBLE_DEVICES
    unless given. ``flops_per_step`` declares the model FLOPs of one step (``step(flops=F)``
    overrides it for one step) and ``precision`` what they are computed in (fp32, bf16, fp16,
    int8): the exporter serves the job's model FLOPs utilization from them. The endpoint is ``url``, else $CANN_EXPORTER_URL, else the node-local
    exporter. Nothing here raises into the training loop or blocks it; see :meth:`stats`.
    One Monitor per training thread. Phases may nest; each counts its exclusive time.
    """

    def __init__(
        self,
        job_name: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        device: int | str | None = None,
        framework: str = "python",
        buffer_size: int = 20_000,
        batch_size: int = 2_000,
        flush_interval: float = 1.0,
        heartbeat_interval: float = 30.0,
        timeout: float = 2.0,
        max_backoff: float = 30.0,
        enabled: bool | None = None,
        flops_per_step: float | None = None,
        precision: str = "bf16",
        run_name: str | None = None,
    ) -> None:
        """``run_name``: the framework's name for the run (adapters pass it); it names the job
        only when neither ``job_name`` nor $CANN_EXPORTER_JOB_NAME / $JOB_NAME does."""
        env = os.environ
        self.flops_per_step = flops_value(flops_per_step) if flops_per_step is not None else None
        if flops_per_step is not None and self.flops_per_step is None:
            log.warning("cann-exporter hooks: flops_per_step=%r is not a positive number of FLOPs; no MFU", flops_per_step)
        self.precision = precision if precision in PRECISIONS else "bf16"
        if precision not in PRECISIONS:
            log.warning("cann-exporter hooks: precision %r is not one of %s; using bf16", precision, ", ".join(PRECISIONS))
        self.identity: Identity = resolve_identity(job_name, rank, world_size, device, framework, env, run_name)
        self.url = url or env.get(names.URL) or DEFAULT_URL
        self._token = token if token is not None else _env_token(env)
        if enabled is None:
            enabled = env.get(names.HOOKS, "on").strip().lower() not in ("0", "off", "false", "no")
        self.enabled = enabled
        self.batch_size = max(1, batch_size)
        self.flush_interval = flush_interval
        self.heartbeat_interval = heartbeat_interval
        self.timeout = timeout
        self.max_backoff = max_backoff
        self._buffer_size = max(1, buffer_size)
        self._step_cm = _Step(self)
        # Seconds the training thread spent in profiling windows (TorchMonitor sets it), sent
        # with each batch and served as npu_job_profiling_overhead_seconds_total.
        self.profiling_seconds: Callable[[], float] | None = None
        self._phase_cms: dict[Any, _Phase] = {}
        self._warned_names = False
        self._closed = False
        self._finished = True  # close() after a crash clears it: no final message then
        self._owner_pid = os.getpid()
        self.created = _perf()  # a crash before this was not this monitor's
        self._fresh_state()
        if not enabled:
            self.step = lambda samples=None, flops=None: _NULL  # type: ignore[method-assign]
            self.phase = lambda name: _NULL  # type: ignore[method-assign]
        _MONITORS.add(self)

    # --- state that a fork child must not inherit -----------------------------------------
    def _fresh_state(self) -> None:
        # This process's claim on its job_name and rank: the exporter refuses a second live
        # process with the same pair, and starts fresh counters for a new one after a finish.
        self._session = os.urandom(8).hex()
        self._buf: deque[Event] = deque()
        self._capacity = self._buffer_size if self.enabled and not self._closed else 0
        self._wake_at = self.batch_size
        self._acc: dict[str, float] = {}
        self._outside: dict[str, float] = {}  # phases outside any step land here, unsent
        self._open: _Phase | None = None  # the innermost phase open now
        self._unknown_phases: dict[str, int] = {}  # names the exporter does not know -> steps
        self._dropped = 0  # written by the training thread only (buffer full)
        self._send_dropped = 0  # written by the sender thread only
        self._dropped_acked = 0  # dropped counts the exporter has been told about
        self._sent = 0
        self._send_errors = 0
        self._last_error: str | None = None  # only while sends fail
        self._last_failure: tuple[str, float] | None = None  # the latest failure and its unix time, kept
        self._memory: tuple[int | None, int | None] | None = None
        self._memory_sent: tuple[int | None, int | None] | None = None
        self._pending: list[dict[str, Any]] | None = None  # encoded steps awaiting a retry
        self._newest_taken = float("-inf")  # perf time of the newest event the sender took
        self._busy = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running = not self.enabled  # disabled: never start a thread
        self._transport: Transport | None = None
        self._failing = False
        self._backoff = 0.0
        self._last_post = 0.0

    def _after_fork_in_child(self) -> None:
        self.identity = Identity(**{**self.identity.__dict__, "pid": os.getpid()})
        self._fresh_state()

    # --- the hot path -----------------------------------------------------------------------
    def step(self, samples: Any = None, flops: Any = None) -> _Step | _Null:
        """Context manager timing one training step; ``samples`` is the batch size (an int),
        ``flops`` this step's model FLOPs when they differ from ``flops_per_step``."""
        cm = self._step_cm
        cm.samples = samples
        cm.flops = flops
        return cm

    def phase(self, name: str) -> _Phase:
        """Context manager adding its exclusive duration to phase ``name`` of the current step.

        A stage (data, h2d, compute, communication, d2h, framework, other) or a word the
        exporter maps onto one (forward, backward, optimizer, all_reduce, dataloader,
        checkpoint, ...: docs/training-hooks.md); the exporter serves the word with its stage.
        A name it does not know is served as "other" and logged here once.
        """
        try:
            return self._phase_cms[name]
        except (KeyError, TypeError):
            return self._new_phase(name)

    def _new_phase(self, name: Any) -> _Phase:
        phase = name[:MAX_PHASE_NAME] if isinstance(name, str) else "other"
        if len(self._phase_cms) >= MAX_PHASE_NAMES:
            if not self._warned_names:
                self._warned_names = True
                log.warning("cann-exporter hooks: more than %d phase names; further ones are reported as 'other'", MAX_PHASE_NAMES)
            phase = "other"
        cm = _Phase(self, phase)
        try:
            self._phase_cms[name] = cm
        except TypeError:  # unhashable name: works, just not cached
            pass
        return cm

    def begin_step(self) -> None:
        """Callback-style start of a step (framework adapters)."""
        self._step_cm.__enter__()

    def end_step(self, samples: Any = None, flops: Any = None) -> None:
        """Callback-style end of the step begun by :meth:`begin_step`; ignored without one."""
        cm = self._step_cm
        if cm._t0 is None:
            return
        cm.samples = samples
        cm.flops = flops
        cm.__exit__(None, None, None)

    def record_step(
        self,
        seconds: float,
        samples: Any = None,
        phases: Mapping[str, float] | None = None,
        end: float | None = None,
    ) -> None:
        """Report a step the loop timed itself; ``end`` is its unix end time (default now)."""
        try:
            event: Event = (_perf(), seconds, samples, dict(phases) if phases else {})
            if end is not None:
                event += (float(end),)
        except Exception:  # bad phases mapping or end: count it, never raise
            self._dropped += 1
            return
        buf = self._buf
        n = len(buf)
        if n < self._capacity:
            buf.append(event)
            if n == self._wake_at:
                self._wake.set()
            if not self._running:
                self._start()
        else:
            self._dropped += 1

    def record_memory(self, allocated_bytes: int | None = None, max_allocated_bytes: int | None = None) -> None:
        """Latest allocator figures (sent with the next batch)."""
        self._memory = (allocated_bytes, max_allocated_bytes)

    # --- lifecycle ------------------------------------------------------------------------
    def _start(self) -> None:
        if self._running or self._closed:
            return
        self._running = True
        try:
            self._thread = threading.Thread(target=self._run, name="cann-exporter-hooks", daemon=True)
            self._thread.start()
        except Exception as exc:  # e.g. interpreter shutting down: stay silent and inert
            self._capacity = 0
            self._last_error = f"cannot start sender: {exc}"

    def flush(self, timeout: float = 5.0) -> bool:
        """Ask the sender to send what is buffered now; True when the buffer emptied in time."""
        if self._thread is None:
            return not self._buf
        self._wake.set()
        deadline = time.monotonic() + timeout
        while self._unsent() and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.005)
        return not self._unsent()

    def _unsent(self) -> bool:
        return bool(self._buf or self._pending or self._busy)

    def close(self, timeout: float = 5.0, *, finished: bool = True) -> None:
        """Send what is buffered (bounded by ``timeout``) and stop. Later steps are ignored.
        ``finished=False`` (a crash) sends the steps without the final message, so the exporter
        serves the rank as stalled instead of finished."""
        if self._closed:
            return
        self._closed = True
        self._finished = finished
        self._capacity = 0
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._stop.set()
            self._wake.set()
            thread.join(timeout)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(finished=exc_type is None or issubclass(exc_type, KeyboardInterrupt))

    def newest_event(self) -> float:
        """perf_counter time of the newest step recorded (-inf before the first)."""
        buf = self._buf
        newest = buf[-1][0] if buf else float("-inf")  # read before _newest_taken: see _take
        return max(newest, self._newest_taken)

    def stats(self) -> dict[str, Any]:
        """Counters for the curious (and tests): sent, dropped, buffered, errors. ``last_error``
        is set only while sends fail; ``last_failure`` and ``last_failure_time`` (unix) keep the
        latest failure after the exporter is back."""
        failure, failed_at = self._last_failure or (None, None)
        return {
            "sent": self._sent,
            "dropped": self._dropped + self._send_dropped,
            "buffered": len(self._buf) + len(self._pending or ()),
            "send_errors": self._send_errors,
            "last_error": self._last_error,
            "last_failure": failure,
            "last_failure_time": failed_at,
            "unknown_phases": dict(self._unknown_phases),
        }

    # --- the sender thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._transport = Transport(self.url, self._token, self.timeout)
        except ValueError as exc:
            log.warning("cann-exporter hooks disabled: %s", exc)
            self._capacity = 0
            return
        while True:
            if self._failing:
                self._stop.wait(self._backoff)
            else:
                self._wake.wait(self.flush_interval)
                self._wake.clear()
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
        self._transport.close()

    def _flush_once(self, final: bool) -> None:
        """Send everything buffered now, in batches; stop at the first failure."""
        self._busy = True
        try:
            self._drain(final)
        finally:
            self._busy = False

    def _drain(self, final: bool) -> None:
        # A fork child never marks the job finished, nor does a process dying of an exception.
        owner = self._owner_pid == os.getpid() and self._finished
        budget = len(self._buf) + self.batch_size  # bounded even if the loop outruns us
        sent_any = sent_final = False
        while budget > 0 and (self._pending or self._buf):
            if self._pending is None:
                taken = self._take(self.batch_size)
                budget -= len(taken)
                steps = self._steps_json(taken)
                if not steps:
                    continue
                self._pending = steps
            last = final and owner and not self._buf
            if not self._send(self._pending, final=last):
                return
            self._pending = None
            sent_any, sent_final = True, last
        if final and owner and not sent_final:
            self._send([], final=True)
        elif not sent_any and time.monotonic() - self._last_post >= self.heartbeat_interval:
            self._send([], final=False)  # keeps a stuck-but-alive rank visible (stall alerts)

    def _take(self, count: int) -> list[Event]:
        buf, out = self._buf, []
        popleft = buf.popleft
        count = min(count, len(buf))
        if count:  # noted before the events leave the buffer, so newest_event() never misses one
            self._newest_taken = max(self._newest_taken, buf[count - 1][0])
        for _ in range(count):
            out.append(popleft())
        return out

    def _steps_json(self, events: list[Event]) -> list[dict[str, Any]]:
        offset = time.time() - _perf()  # perf_counter -> unix time, fresh for every batch
        declared = self.flops_per_step
        steps = [step for step in (step_json(e, offset, declared) for e in events) if step is not None]
        self._send_dropped += len(events) - len(steps)  # unusable values (NaN, negative, ...)
        return steps

    def _send(self, steps: list[dict[str, Any]], final: bool) -> bool:
        """POST one batch. On failure a batch that surely did not arrive stays pending."""
        body, dropped = self._encode(steps, final)
        assert self._transport is not None
        self._last_post = time.monotonic()
        try:
            reply = self._transport.post(body)
        except NotSent as exc:
            self._note_failure(f"exporter unreachable at {redacted(self.url)}: {exc}")
            return False
        except Exception as exc:  # timeout or reset mid-request: the batch may or may not have landed
            self._give_up(steps)
            self._note_failure(f"sending to {redacted(self.url)} failed: {exc!r}")
            return False
        if reply.status == 200:
            self._sent += len(steps)
            self._dropped_acked += dropped
            self._memory_sent = self._memory
            self._note_success()
            if b"unknown_phases" in reply.body:
                self._note_unknown_phases(reply.body)
            return True
        message = f"exporter rejected a batch ({reply.status}): {reply.body[:300].decode(errors='replace')}"
        if reply.status == 409:  # another live process holds this job_name and rank: retry, it may be gone
            self._note_failure(message)
            return False
        self._give_up(steps)
        if reply.status == 413 and self.batch_size > 1:
            self.batch_size = max(1, self.batch_size // 2)
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
        if self._pending is steps:
            self._pending = None

    def _encode(self, steps: list[dict[str, Any]], final: bool) -> tuple[bytes, int]:
        dropped = max(0, self._dropped + self._send_dropped - self._dropped_acked)
        ident = self.identity
        doc: dict[str, Any] = {
            "job_name": ident.job_name,
            "rank": ident.rank,
            "world_size": ident.world_size,
            "framework": ident.framework,
            "pid": ident.pid,
            "session": self._session,
            "dropped": dropped,
            "steps": steps,
        }
        if ident.device is not None:
            doc["device"] = ident.device
        if self.precision != "bf16":
            doc["precision"] = self.precision
        if self.profiling_seconds is not None and (seconds := self.profiling_seconds()) > 0:
            doc["profiling_seconds"] = round(seconds, 6)
        if final:
            doc["final"] = True
        memory = self._memory
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
        base = self.flush_interval if self._backoff == 0 else self._backoff * 2
        self._backoff = min(self.max_backoff, base) * random.uniform(0.8, 1.2)

    def _note_success(self) -> None:
        if self._failing:  # at the failure's level, so a log that said "unreachable" says this too
            log.warning("cann-exporter hooks: exporter reachable again at %s; sending resumed", redacted(self.url))
        self._last_error = None
        self._failing = False
        self._backoff = 0.0


def _env_token(env: Mapping[str, str]) -> str | None:
    token = env.get(names.TOKEN)
    path = env.get(names.TOKEN_FILE)
    if not token and path:
        try:
            with open(path, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            log.warning("cann-exporter hooks: cannot read token file %s: %s", path, exc)
    return token or None


def _after_fork_in_child() -> None:
    for mon in list(_MONITORS):
        mon._after_fork_in_child()


def _close_all_at_exit() -> None:
    # Bounded: at most ~1 s per monitor even when the exporter is slow or gone.
    for mon in list(_MONITORS):
        mon.close(timeout=1.0, finished=not _crash.ended(mon))


class _Crash:
    """Notes an exception that ends the main thread, so the exit flush sends the steps but no
    final message: the exporter then serves the rank as stalled (a crash pages), not finished.

    sys.excepthook also prints errors that C extensions report and then carry on from (a module
    failing to import inside a framework's import, through PyErr_Print): a monitor that recorded
    a step after the hook ran, or was created after it, did not crash."""

    def __init__(self) -> None:
        self.previous = sys.excepthook
        self.at: float | None = None  # perf_counter time of the latest uncaught exception

    def __call__(self, exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not issubclass(exc_type, KeyboardInterrupt):  # Ctrl-C is the user ending the run
            self.at = _perf()
        self.previous(exc_type, exc, tb)

    def ended(self, mon: Monitor) -> bool:
        return self.at is not None and mon.created < self.at and mon.newest_event() < self.at


_crash = _Crash()
sys.excepthook = _crash
os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)


class _Closable(Protocol):
    def flush(self, timeout: float = ...) -> bool: ...
    def close(self, timeout: float = ...) -> None: ...


M = TypeVar("M", bound=_Closable)


def finish_training(monitor: M | None, owned: bool) -> M | None:
    """A framework callback's end of training: close the monitor it created (-> None), only
    flush one the caller handed in, which the caller still uses and closes (-> the monitor)."""
    if monitor is None:
        return None
    if owned:
        monitor.close()
        return None
    monitor.flush()
    return monitor
