"""Step and phase timing on the training thread: the context managers ``Monitor.step`` and
``Monitor.phase`` hand out.

Each is made once and reused, so a step allocates nothing but its phase dict and its event
tuple. A step ends by appending the event to the sender's buffer (append is atomic under the
GIL: no lock on the hot path); only a full buffer or a sender not yet running takes the
sender's slower way in, :meth:`Sender.put`.
"""

from __future__ import annotations

from time import perf_counter as _perf
from typing import Any, Literal

from exporter.hooks.sender import Sender
from exporter.hooks.wire import OUTSIDE, Event


class Step:
    """``with mon.step(samples=n):``, reused for every step. It also holds the phases of the
    step in progress (``acc``), which the phases of the monitor add to; between steps they add
    to ``outside``, sent when the outermost of them ends (a checkpoint saved between steps)."""

    __slots__ = ("_out", "samples", "flops", "index", "_t0", "acc", "outside", "open")

    def __init__(self, out: Sender) -> None:
        self._out = out
        self.samples: Any = None
        self.flops: Any = None  # this step's model FLOPs when step(flops=) gave them
        self.index: Any = None  # the training step it carries out, when step(index=) gave it
        self._t0: float | None = None
        self.reset()

    def reset(self) -> None:
        """No step in progress (and, in a fork child, none of the parent's phases)."""
        self.acc: dict[str, float] = {}
        self.outside = self.acc  # phases outside any step: sent by between()
        self.open: Phase | None = None  # the innermost phase open now

    def between(self, end: float, seconds: float) -> None:
        """The outermost phase open between steps ended at ``end`` (perf_counter), lasting
        ``seconds``: send it with the phases nested in it."""
        phases = self.outside
        self.acc = self.outside = {}
        self._out.put((end, seconds, OUTSIDE, phases))

    def new_phase(self, name: str) -> Phase:
        return Phase(self, name)

    def __enter__(self) -> Step:
        self.acc = {}
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        t1 = _perf()
        t0, self._t0 = self._t0, None  # so a stray end() cannot reuse it
        if exc_type is None and t0 is not None:  # a step that raised did not complete
            event: Event
            if self.index is None and self.flops is None:
                event = (t1, t1 - t0, self.samples, self.acc)
            else:
                event = (t1, t1 - t0, self.samples, self.acc, None, self.flops, self.index)
            out = self._out
            buf = out.buf
            n = len(buf)
            if n < out.capacity:
                buf.append(event)
                if n == out.wake_at:
                    out.wake.set()
            else:
                out.put(event)
        self.acc = self.outside  # a phase between steps must not touch the step just buffered
        return False

    def end(self, samples: Any, flops: Any, index: Any = None) -> None:
        """Callback-style end of the step ``__enter__`` began; ignored without one."""
        if self._t0 is not None:
            self.samples = samples
            self.flops = flops
            self.index = index
            self.__exit__(None, None, None)


class Phase:
    """One per phase name, reused; phases add up within the enclosing step. A phase opened
    inside another counts exclusive time: its time comes out of the enclosing phase's, as
    profilers count self time. A phase re-entered inside itself counts once."""

    __slots__ = ("_step", "_name", "_t0", "_outer", "_inner", "_depth")

    def __init__(self, step: Step, name: str) -> None:
        self._step = step
        self._name = name
        self._t0 = 0.0
        self._outer: Phase | None = None
        self._inner = 0.0  # seconds of the phases nested in this one
        self._depth = 0

    def __enter__(self) -> Phase:
        if self._depth:
            self._depth += 1
            return self
        self._depth = 1
        step = self._step
        self._outer = step.open
        step.open = self
        self._inner = 0.0
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        t1 = _perf()
        seconds = t1 - self._t0
        self._depth -= 1
        if self._depth:
            return False
        step = self._step
        outer = step.open = self._outer
        if outer is not None:
            outer._inner += seconds
        acc = step.acc
        acc[self._name] = acc.get(self._name, 0.0) + seconds - self._inner
        if outer is None and acc is step.outside:  # the outermost phase between steps: send it
            step.between(t1, seconds)
        return False


class NullStep(Step):
    """What a disabled monitor hands out: a step, and phases, that time nothing."""

    __slots__ = ()

    def new_phase(self, name: str) -> Phase:
        return NullPhase(self, name)

    def __enter__(self) -> NullStep:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        return False


class NullPhase(Phase):
    __slots__ = ()

    def __enter__(self) -> NullPhase:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        return False
