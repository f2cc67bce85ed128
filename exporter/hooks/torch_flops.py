"""``TorchMonitor(measure_flops=True)``: the model FLOPs of one step, counted once by PyTorch's
FLOP counter (``torch.utils.flop_counter.FlopCounterMode``) around the first step that
completes (its forward and backward, whatever the loop runs inside the step), then declared as
the monitor's ``flops_per_step``. That step runs slower (every operator is intercepted) and is
reported as usual; later steps are not touched.

Never breaks the loop: a counter that cannot start or stop, or counts nothing, is logged once
at WARNING and leaves the monitor without FLOPs (no MFU)."""

from __future__ import annotations

from typing import Any

from exporter.hooks.monitor import Monitor, log


class FlopMeasure:
    """One measurement: ``start()`` before a step's body, ``stop(completed)`` after it; ``done``
    once a completed step was measured or measuring failed."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.done = False
        self._mode: Any = None

    def start(self) -> None:
        if self.done or self._mode is not None:
            return
        try:
            from torch.utils.flop_counter import FlopCounterMode

            mode: Any = FlopCounterMode(display=False)  # torch leaves its __enter__ unannotated
            mode.__enter__()
            self._mode = mode
        except Exception as exc:
            self._give_up(f"the FLOP counter did not start ({exc!r})")

    def stop(self, completed: bool) -> None:
        mode, self._mode = self._mode, None
        if mode is None:
            return
        try:
            mode.__exit__(None, None, None)
            flops = int(mode.get_total_flops())
        except Exception as exc:
            self._give_up(f"the FLOP counter failed ({exc!r})")
            return
        if not completed:  # the step raised: measure the next one
            return
        self.done = True
        if flops <= 0:
            self._give_up("the FLOP counter counted no FLOPs in the step (no operator it knows ran)")
            return
        self.monitor.flops_per_step = float(flops)
        log.info("cann-exporter hooks: measured %d FLOPs per step (torch.utils.flop_counter, forward and backward)", flops)

    def _give_up(self, why: str) -> None:
        self.done = True
        log.warning("cann-exporter hooks: measure_flops: %s; no FLOPs declared, no MFU", why)


class MeasuredStep:
    """``with mon.step():`` while the FLOPs are measured: the counter runs inside the step's timing."""

    __slots__ = ("measure", "inner")

    def __init__(self, measure: FlopMeasure, inner: Any) -> None:
        self.measure = measure
        self.inner = inner

    def __enter__(self) -> Any:
        entered = self.inner.__enter__()
        self.measure.start()
        return entered

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.measure.stop(exc_type is None)
        return bool(self.inner.__exit__(exc_type, exc, tb))
