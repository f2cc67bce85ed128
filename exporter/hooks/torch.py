"""PyTorch adapter: step and phase times on the device's own clock, never a synchronize.

On an NPU (torch_npu) or CUDA device each step and phase records a pair of timing events
on the current stream; they are resolved with the non-blocking ``query()`` at the start
of later steps and reported through :class:`~exporter.hooks.Monitor.record_step`. Until
then the host runs ahead as usual. On the CPU, host time is the device time and the plain
Monitor is used. Allocator figures (``memory_allocated``/``max_memory_allocated``, host-side
counters) are read at most every ``memory_interval`` seconds.

With ``profile_every=SECONDS`` (or $CANN_EXPORTER_PROFILE_EVERY) the next ``profile_steps``
steps (default 5, $CANN_EXPORTER_PROFILE_STEPS) run under the device's profiler every that
many seconds (exporter.hooks.profiling): torch_npu's on an NPU, torch.profiler on CUDA and
the CPU. Off by default.

With ``measure_flops=True`` the first step that completes runs under PyTorch's FLOP counter
(exporter.hooks.torch_flops): its count becomes ``flops_per_step`` (logged at INFO), for the
exporter's model FLOPs utilization. Off by default.

    from exporter.hooks.torch import TorchMonitor
    mon = TorchMonitor(job_name="resnet50")
    for x, y in loader:
        with mon.step(samples=len(x)):
            with mon.phase("h2d"):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with mon.phase("compute"):
                loss = loss_fn(model(x), y); loss.backward(); opt.step()
    mon.close()
"""

from __future__ import annotations

import os
import time
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from time import perf_counter as _perf
from typing import Any, Literal

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("exporter.hooks.torch needs PyTorch (pip install torch); exporter.hooks.Monitor works without it") from exc

from exporter.hooks import env as names
from exporter.hooks.monitor import Monitor, log
from exporter.hooks.profiling import DEFAULT_STEPS, Profiling, parse_every
from exporter.hooks.torch_flops import FlopMeasure, MeasuredStep
from exporter.hooks.wire import MAX_PHASE_NAME, MAX_PHASE_NAMES, exclusive

__all__ = ["TorchMonitor", "device_backend"]


def device_backend(device: Any = None) -> tuple[str, Any]:
    """("npu", torch.npu) / ("cuda", torch.cuda) / ("cpu", None) for ``device`` or the best available."""
    kind = torch.device(device).type if device is not None else None
    if kind in (None, "npu"):
        npu = getattr(torch, "npu", None)  # present once torch_npu is imported
        if npu is not None and _available(npu):
            return "npu", npu
    if kind in (None, "cuda") and _available(torch.cuda):
        return "cuda", torch.cuda
    return "cpu", None


def _available(module: Any) -> bool:
    try:
        return bool(module.is_available())
    except Exception:
        return False


def device_label(kind: str, index: int | None, env: Any = None) -> str | None:
    """The chip logic id for framework device ``index`` (NPU ids are relative to ASCEND_RT_VISIBLE_DEVICES)."""
    if index is None:
        return None
    env = os.environ if env is None else env
    name = "ASCEND_RT_VISIBLE_DEVICES" if kind == "npu" else "CUDA_VISIBLE_DEVICES"
    visible = [v.strip() for v in env.get(name, "").split(",") if v.strip()]
    if visible:
        return visible[index] if index < len(visible) and visible[index].isdigit() else None
    return str(index)


@dataclass
class _Pending:
    start: Any
    end: Any
    samples: Any
    host_seconds: float
    phases: list[tuple[str, Any, Any]] = field(default_factory=list)
    host_end: float = 0.0  # perf_counter time the step ended on the host: where it is placed in time
    index: Any = None  # the training step it carried out (Monitor.step's index)


class _DeviceStep:
    __slots__ = ("_tm", "samples", "index")

    def __init__(self, tm: TorchMonitor) -> None:
        self._tm = tm
        self.samples: Any = None
        self.index: Any = None

    def __enter__(self) -> _DeviceStep:
        self._tm.begin_step()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is None:
            self._tm.end_step(self.samples, self.index)
        else:
            self._tm._abandon()
        return False


class _DevicePhase:
    """A phase as a pair of device events; nested phases count exclusive time (see _report).
    A phase re-entered inside itself counts once. Outside any step (a checkpoint saved between
    steps: host work) it is the monitor's host-timed phase, sent after the steps before it."""

    __slots__ = ("_tm", "_name", "_start", "_depth", "_host")

    def __init__(self, tm: TorchMonitor, name: str) -> None:
        self._tm = tm
        self._name = name
        self._start: Any = None
        self._depth = 0
        self._host: Any = None  # the host phase standing in for this one between steps

    def __enter__(self) -> _DevicePhase:
        self._depth += 1
        if self._depth == 1:
            tm = self._tm
            if tm._current is None:
                tm._resolve()  # steps the device finished go before this phase
                self._host = tm.monitor.phase(self._name)
                self._host.__enter__()
            else:
                self._start = tm._record()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        self._depth -= 1
        host = self._host
        if not self._depth and host is not None:
            self._host = None
            self._tm._resolve()  # a save synchronised the device: its steps are done, sent first
            host.__exit__(exc_type, exc, tb)
            return False
        current = self._tm._current
        if not self._depth and current is not None and self._start is not None:
            end = self._tm._record()
            if end is not None:
                current.phases.append((self._name, self._start, end))
        return False


class _ProfiledStep:
    """``with mon.step():`` when profiling windows are on: the window opens before the step's
    timing starts and closes after it ends."""

    __slots__ = ("_profiling", "inner")

    def __init__(self, profiling: Profiling) -> None:
        self._profiling = profiling
        self.inner: AbstractContextManager[Any] = nullcontext()  # the step it wraps, set by step()

    def __enter__(self) -> Any:
        self._profiling.before_step()
        return self.inner.__enter__()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        try:
            return bool(self.inner.__exit__(exc_type, exc, tb))
        finally:
            self._profiling.after_step()


class TorchMonitor:
    """Monitor for PyTorch loops; same ``step``/``phase``/``close`` as :class:`Monitor`."""

    def __init__(
        self,
        job_name: str | None = None,
        *,
        monitor: Monitor | None = None,
        device: Any = None,
        backend: Any = None,
        memory_interval: float = 30.0,
        max_pending: int = 128,
        profile_every: float | None = None,
        profile_steps: int | None = None,
        measure_flops: bool = False,
        **monitor_kwargs: Any,
    ) -> None:
        if backend is not None:
            self.kind, self.backend = "custom", backend
        else:
            self.kind, self.backend = device_backend(device)
        if monitor is None:
            monitor_kwargs.setdefault("framework", "pytorch")
            if "device" not in monitor_kwargs and self.backend is not None:
                monitor_kwargs["device"] = device_label(self.kind, self._device_index(device))
            monitor = Monitor(job_name, **monitor_kwargs)
        self.monitor = monitor
        self.memory_interval = memory_interval
        self.max_pending = max(1, max_pending)
        self._pending: deque[_Pending] = deque()
        self._free: list[Any] = []
        self._current: _Pending | None = None
        self._host_t0 = 0.0
        self._next_memory = 0.0
        self._step_cm = _DeviceStep(self)
        self._phase_cms: dict[str, _DevicePhase] = {}
        self._profiling = self._profiling_windows(profile_every, profile_steps)
        self._profiled_step = _ProfiledStep(self._profiling) if self._profiling is not None else None
        self._flops = FlopMeasure(monitor) if measure_flops and monitor.enabled else None  # None once measured

    def _profiling_windows(self, every: float | None, steps: int | None) -> Profiling | None:
        """Profiling windows when asked for (argument, else environment); None when off or unavailable."""
        env = os.environ
        every = every if every is not None else parse_every(env.get(names.PROFILE_EVERY))
        if not every or every <= 0 or not self.monitor.enabled:
            return None
        if steps is None:
            text = env.get(names.PROFILE_STEPS, "").strip()
            steps = int(text) if text.isascii() and text.isdigit() and int(text) > 0 else DEFAULT_STEPS
        try:
            from exporter.hooks.torch_profiler import profiler_backend

            backend = profiler_backend(self.kind)
        except Exception as exc:  # e.g. torch_npu without its profiler
            log.warning("cann-exporter hooks: profiling disabled for this process: no %s profiler (%r)", self.kind, exc)
            return None
        monitor = self.monitor
        profiling = Profiling(backend, lambda: monitor.identity, monitor.url, monitor._token, float(every), steps)
        monitor.profiling_seconds = lambda: profiling.overhead
        return profiling

    def _device_index(self, device: Any) -> int | None:
        try:
            if device is not None and torch.device(device).index is not None:
                return torch.device(device).index
            return int(self.backend.current_device())
        except Exception:
            return None

    # --- the loop-facing API ----------------------------------------------------------------
    def step(self, samples: Any = None, index: Any = None) -> Any:
        """``index``: the training step it carries out (see Monitor.step)."""
        cm: AbstractContextManager[Any]
        if self.backend is None:
            cm = self.monitor.step(samples, index=index)
        else:
            cm = self._step_cm
            self._step_cm.samples = samples
            self._step_cm.index = index
        wrapped = self._profiled_step
        if wrapped is not None:
            wrapped.inner = cm
            cm = wrapped
        if self._flops is not None:
            if not self._flops.done:
                return MeasuredStep(self._flops, cm)
            self._flops = None
        return cm

    def phase(self, name: str) -> Any:
        if self.backend is None:
            return self.monitor.phase(name)
        cm = self._phase_cms.get(name)
        if cm is None:
            word = name[:MAX_PHASE_NAME] if isinstance(name, str) and len(self._phase_cms) < MAX_PHASE_NAMES else "other"
            cm = self._phase_cms[name] = _DevicePhase(self, word)
        return cm

    def begin_step(self) -> None:
        if self._profiling is not None:
            self._profiling.before_step()
        if self.backend is None:
            self.monitor.begin_step()
        else:
            self._resolve()
            self._current = _Pending(self._record(), None, None, 0.0)
            self._host_t0 = _perf()
        if self._flops is not None:  # callback-style adapters: measured between begin and end
            self._flops.start()

    def end_step(self, samples: Any = None, index: Any = None) -> None:
        if self._flops is not None:
            self._flops.stop(True)
        if self.backend is None:
            self.monitor.end_step(samples, index=index)
        else:
            current, self._current = self._current, None
            if current is not None:
                current.end = self._record()
                current.samples = samples
                current.index = index
                current.host_end = _perf()
                current.host_seconds = current.host_end - self._host_t0
                if current.start is None or current.end is None:  # no events here: host time
                    self._report(current, resolved=False)
                else:
                    self._pending.append(current)
                if len(self._pending) > self.max_pending:  # device far behind or hung: host time
                    self._report(self._pending.popleft(), resolved=False)
        self._maybe_memory()
        if self._profiling is not None:
            self._profiling.after_step()

    def _abandon(self) -> None:
        self._current = None

    def record_phase(self, name: str, seconds: float, end: float | None = None) -> None:
        """A phase outside any step timed by the caller (see Monitor.record_phase); the steps
        the device finished go first."""
        if self.backend is not None:
            self._resolve()
        self.monitor.record_phase(name, seconds, end)

    # --- events -----------------------------------------------------------------------------
    def _record(self) -> Any:
        try:
            event = self._free.pop() if self._free else self.backend.Event(enable_timing=True)
            event.record()
            return event
        except Exception:  # never let timing break the step
            return None

    def _resolve(self) -> None:
        """Report every finished step, oldest first; stop at the first unfinished one."""
        pending = self._pending
        try:
            while pending and pending[0].end.query():
                self._report(pending.popleft(), resolved=True)
        except Exception:  # a broken event: fall back to host time rather than lose steps
            while pending:
                self._report(pending.popleft(), resolved=False)

    def _report(self, item: _Pending, resolved: bool) -> None:
        try:
            if resolved:
                seconds = item.start.elapsed_time(item.end) / 1000.0  # elapsed_time is in ms
                t0 = item.start  # offsets from the step's start place nested phases
                spans = [(name, t0.elapsed_time(a) / 1000.0, t0.elapsed_time(b) / 1000.0) for name, a, b in item.phases]
                phases = exclusive(spans)
            else:
                seconds, phases = item.host_seconds, {}
        except Exception:
            seconds, phases = item.host_seconds, {}
        end = time.time() - (_perf() - item.host_end)  # placed where it ended on the host, not when resolved
        self.monitor.record_step(seconds, samples=item.samples, phases=phases, end=end, index=item.index)
        if resolved:
            self._free.append(item.start)
            self._free.append(item.end)
            self._free.extend(e for _, a, b in item.phases for e in (a, b))
            del self._free[4 * self.max_pending :]

    def _maybe_memory(self) -> None:
        if self.backend is None or self.memory_interval <= 0:
            return
        now = _perf()
        if now < self._next_memory:
            return
        self._next_memory = now + self.memory_interval
        try:  # allocator bookkeeping on the host: no device round trip
            self.monitor.record_memory(int(self.backend.memory_allocated()), int(self.backend.max_memory_allocated()))
        except Exception:
            self.memory_interval = 0.0  # not supported here: stop asking

    # --- lifecycle --------------------------------------------------------------------------
    def flush(self, timeout: float = 5.0) -> bool:
        self._drain_pending()
        return self.monitor.flush(timeout)

    def close(self, timeout: float = 5.0, *, finished: bool = True) -> None:
        """Wait for the last steps' events (outside the loop, so a wait is fine), then close
        (``finished=False``: a crash, as :meth:`Monitor.close`)."""
        if self._profiling is not None:
            self._profiling.close(timeout)
        self._drain_pending()
        self.monitor.close(timeout, finished=finished)

    def _drain_pending(self) -> None:
        while self._pending:
            item = self._pending.popleft()
            try:
                item.end.synchronize()
                self._report(item, resolved=True)
            except Exception:
                self._report(item, resolved=False)

    def stats(self) -> dict[str, Any]:
        profiling = self._profiling.stats() if self._profiling is not None else {}
        return {**self.monitor.stats(), "unresolved": len(self._pending), **profiling}

    def __enter__(self) -> TorchMonitor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(finished=exc_type is None or issubclass(exc_type, KeyboardInterrupt))
