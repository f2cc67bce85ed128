"""TorchMonitor(measure_flops=True): a real CPU model whose FLOPs are known by arithmetic, counted
once by PyTorch's FLOP counter, declared for every step sent (the measured one included) to a
real HTTP sink; a step the counter finds nothing in, or that raises, never breaks the loop."""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")

from exporter.hooks.torch import TorchMonitor  # noqa: E402

BATCH, IN, OUT = 4, 32, 16
FORWARD = 2 * IN * OUT * BATCH  # one matrix multiply: a multiply and an add per weight and sample
STEP_FLOPS = 3 * FORWARD  # backward: the gradients of the input and of the weight, one multiply each


def _train(tm: TorchMonitor, steps: int, raise_first: bool = False) -> None:
    model = torch.nn.Linear(IN, OUT)
    for k in range(steps):
        x = torch.randn(BATCH, IN, requires_grad=True)  # its gradient is computed too: the third multiply
        try:
            with tm.step(samples=BATCH):
                model(x).sum().backward()
                if raise_first and k == 0:
                    raise RuntimeError("bad batch")
        except RuntimeError:
            pass
    tm.close()


def test_measured_flops_are_the_arithmetic_and_every_step_carries_them(sink, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.hooks")
    tm = TorchMonitor("flops", url=sink.url, flush_interval=0.05, measure_flops=True)
    _train(tm, 5, raise_first=True)  # the step that raised is not the measured one: the next is
    assert tm.monitor.flops_per_step == STEP_FLOPS
    measured = [r for r in caplog.records if "FLOPs per step" in r.getMessage()]
    assert [(r.levelno, f"measured {STEP_FLOPS} FLOPs per step" in r.getMessage()) for r in measured] == [(logging.INFO, True)]
    steps = sink.steps(job_name="flops")
    assert len(steps) == 4 and [s.get("flops") for s in steps] == [STEP_FLOPS] * 4


def test_callback_style_steps_are_measured_between_begin_and_end(sink) -> None:
    tm = TorchMonitor("flops-callbacks", url=sink.url, flush_interval=0.05, measure_flops=True)
    model = torch.nn.Linear(IN, OUT)
    for _ in range(3):
        tm.begin_step()
        model(torch.randn(BATCH, IN, requires_grad=True)).sum().backward()
        tm.end_step(BATCH)
    tm.close()
    assert tm.monitor.flops_per_step == STEP_FLOPS
    assert [s.get("flops") for s in sink.steps(job_name="flops-callbacks")] == [STEP_FLOPS] * 3


def test_a_step_without_counted_operators_warns_once_and_declares_nothing(sink, caplog: pytest.LogCaptureFixture) -> None:
    tm = TorchMonitor("no-flops", url=sink.url, flush_interval=0.05, measure_flops=True)
    for _ in range(4):
        with tm.step(samples=BATCH):
            torch.randn(BATCH, IN).relu().sum()  # elementwise only: the counter knows no FLOPs here
    tm.close()
    assert tm.monitor.flops_per_step is None
    warnings = [r for r in caplog.records if "measure_flops" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING and "no MFU" in warnings[0].getMessage()
    steps = sink.steps(job_name="no-flops")
    assert len(steps) == 4 and all("flops" not in s for s in steps)


def test_off_by_default_and_when_the_monitor_is_disabled() -> None:
    assert TorchMonitor("off", url="http://127.0.0.1:9", enabled=False, measure_flops=True)._flops is None
    tm = TorchMonitor("default", url="http://127.0.0.1:9", enabled=False)
    assert tm._flops is None and tm.monitor.flops_per_step is None
