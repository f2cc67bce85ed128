"""The in-loop client: a few attribute writes per step, everything else on a daemon thread.

The training thread only reads ``perf_counter`` and appends a tuple to a bounded deque
(steps.py); a background thread batches and POSTs them (sender.py); a fork child, the
interpreter's exit and a crash are handled in lifecycle.py. :class:`Monitor` puts them
together: its settings, and what the loop calls.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from time import perf_counter as _perf
from typing import Any

from exporter.hooks import env as names
from exporter.hooks.identity import Identity, process_start, resolve_identity
from exporter.hooks.lifecycle import finish_training, track
from exporter.hooks.sender import Sender
from exporter.hooks.steps import NullStep, Phase, Step
from exporter.hooks.wire import MAX_PHASE_NAME, MAX_PHASE_NAMES, OUTSIDE, PRECISIONS, Event, flops_value

__all__ = ["DEFAULT_URL", "MAX_PHASE_NAMES", "Monitor", "finish_training", "log"]

log = logging.getLogger("exporter.hooks")

DEFAULT_URL = "http://127.0.0.1:9435"


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
        # Seconds the training thread spent in profiling windows (TorchMonitor sets it).
        self.profiling_seconds: Callable[[], float] | None = None
        self._sender = Sender(self, self._token, buffer_size, enabled)
        self._step_cm = Step(self._sender) if enabled else NullStep(self._sender)
        self._phase_cms: dict[Any, Phase] = {}
        self._warned_names = False
        self.created = _perf()  # a crash before this was not this monitor's
        track(self)

    def _after_fork_in_child(self) -> None:
        started, proc = process_start()  # the child's own start: its start-up is its own
        self.identity = Identity(**{**self.identity.__dict__, "pid": os.getpid(), "started": started, "proc": proc})
        self._sender.reset()
        self._step_cm.reset()

    # --- the hot path -----------------------------------------------------------------------
    def step(self, samples: Any = None, flops: Any = None, index: Any = None) -> Step:
        """Context manager timing one training step; ``samples`` is the batch size (an int),
        ``flops`` this step's model FLOPs when they differ from ``flops_per_step``, ``index``
        the training step it carries out (the global step: after a restart, an index an earlier
        process completed is re-done work; the same index twice is one step in parts)."""
        cm = self._step_cm
        cm.samples = samples
        cm.flops = flops
        cm.index = index
        return cm

    def phase(self, name: str) -> Phase:
        """Context manager adding its exclusive duration to phase ``name`` of the current step;
        outside any step (a checkpoint saved between steps) it is sent on its own and counted by
        the exporter as badput of its kind (checkpoint_save, checkpoint_restore, data_wait, other).

        A stage (data, h2d, compute, communication, d2h, framework, other) or a word the
        exporter maps onto one (forward, backward, optimizer, all_reduce, dataloader,
        checkpoint, ...: docs/training-hooks.md); the exporter serves the word with its stage.
        A name it does not know is served as "other" and logged here once.
        """
        try:
            return self._phase_cms[name]
        except (KeyError, TypeError):
            return self._new_phase(name)

    def _new_phase(self, name: Any) -> Phase:
        word = name[:MAX_PHASE_NAME] if isinstance(name, str) else "other"
        if len(self._phase_cms) >= MAX_PHASE_NAMES:
            if not self._warned_names and self.enabled:
                log.warning("cann-exporter hooks: more than %d phase names; further ones are reported as 'other'", MAX_PHASE_NAMES)
            self._warned_names = True
            word = "other"
        cm = self._step_cm.new_phase(word)
        try:
            self._phase_cms[name] = cm
        except TypeError:  # unhashable name: works, just not cached
            pass
        return cm

    def begin_step(self) -> None:
        """Callback-style start of a step (framework adapters)."""
        self._step_cm.__enter__()

    def end_step(self, samples: Any = None, flops: Any = None, index: Any = None) -> None:
        """Callback-style end of the step begun by :meth:`begin_step`; ignored without one."""
        self._step_cm.end(samples, flops, index)

    def record_step(
        self,
        seconds: float,
        samples: Any = None,
        phases: Mapping[str, float] | None = None,
        end: float | None = None,
        index: Any = None,
    ) -> None:
        """Report a step the loop timed itself; ``end`` is its unix end time (default now),
        ``index`` the training step it carried out (see :meth:`step`)."""
        try:
            acc = dict(phases) if phases else {}
            event: Event
            if end is None and index is None:
                event = (_perf(), seconds, samples, acc)
            else:
                event = (_perf(), seconds, samples, acc, None if end is None else float(end), None, index)
        except Exception:  # bad phases mapping or end: count it, never raise
            self._sender.dropped += 1
            return
        self._sender.put(event)

    def record_phase(self, name: str, seconds: float, end: float | None = None) -> None:
        """Report a phase run outside any step that the caller timed itself (a framework's
        checkpoint save); ``end`` is its unix end time (default now)."""
        try:
            phases = {name[:MAX_PHASE_NAME] if isinstance(name, str) else "other": seconds}
            event: Event = (_perf(), seconds, OUTSIDE, phases) if end is None else (_perf(), seconds, OUTSIDE, phases, float(end))
        except Exception:
            return
        if self.enabled:
            self._sender.put(event)

    def record_memory(self, allocated_bytes: int | None = None, max_allocated_bytes: int | None = None) -> None:
        """Latest allocator figures (sent with the next batch)."""
        self._sender.memory = (allocated_bytes, max_allocated_bytes)

    # --- lifecycle ------------------------------------------------------------------------
    def flush(self, timeout: float = 5.0) -> bool:
        """Ask the sender to send what is buffered now; True when the buffer emptied in time."""
        return self._sender.flush(timeout)

    def close(self, timeout: float = 5.0, *, finished: bool = True) -> None:
        """Send what is buffered (bounded by ``timeout``) and stop. Later steps are ignored.
        ``finished=False`` (a crash) sends the steps without the final message, so the exporter
        serves the rank as stalled instead of finished."""
        self._sender.close(timeout, finished)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(finished=exc_type is None or issubclass(exc_type, KeyboardInterrupt))

    def newest_event(self) -> float:
        """perf_counter time of the newest step recorded (-inf before the first)."""
        return self._sender.newest_event()

    def stats(self) -> dict[str, Any]:
        """Counters for the curious (and tests): sent, dropped, buffered, errors. ``last_error``
        is set only while sends fail; ``last_failure`` and ``last_failure_time`` (unix) keep the
        latest failure after the exporter is back."""
        return self._sender.stats()


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
