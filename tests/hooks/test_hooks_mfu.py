"""Model FLOPs utilization end to end: a loop declaring its FLOPs, a real exporter on the
simulator with a configured peak or none (the 910B3's peak derived from its AI cores and clock),
and the ratio it serves checked against the arithmetic."""

from __future__ import annotations

import pytest

from exporter.hooks import Monitor
from exporter.hooks.wire import step_json

PEAK = 3.13e14  # the peak configured for the simulator's 910B3 at bf16 (no published figure ships)
DERIVED = 20 * 1800e6 * 4096 * 2  # the simulated 910B3's `-t common`: 20 AI cores at a rated 1800 MHz
STEP = 0.05  # seconds per step, as the loop times it
TARGET = 0.45  # the MFU the declared FLOPs make: F / STEP / PEAK
FLOPS = TARGET * STEP * PEAK


def _loop(mon: Monitor, steps: int = 40, flops: float | None = None) -> None:
    for _ in range(steps):
        if flops is None:
            mon.record_step(STEP, samples=8, phases={"compute": STEP / 2})
        else:
            with mon.step(samples=8, flops=flops):
                pass
    mon.close()


def test_mfu_matches_the_arithmetic_and_is_absent_without_device_or_peak(start_exporter):
    exporter = start_exporter("--npu-smi.peak-flops=910B3:bf16=3.13e14")
    exporter.wait_value("npu_peak_flops_per_second", PEAK, device="2", precision="bf16")  # the first npu-smi read is in
    common = {"url": exporter.url, "world_size": 4, "flush_interval": 0.05}
    _loop(Monitor("mfu", rank=0, device=2, flops_per_step=FLOPS, **common))
    _loop(Monitor("mfu", rank=1, flops_per_step=FLOPS, **{**common, "url": exporter.url}), steps=10)  # no device
    _loop(Monitor("mfu", rank=2, device=3, flops_per_step=FLOPS, precision="fp32", **common), steps=10)  # no fp32 peak
    _loop(Monitor("mfu", rank=3, device=4, **common), steps=10)  # no FLOPs declared
    for rank, steps in (("0", 40), ("1", 10), ("2", 10), ("3", 10)):
        exporter.wait_value("npu_job_iterations_total", steps, job_name="mfu", rank=rank)
    mfu = exporter.value("npu_job_model_flops_utilization_ratio", job_name="mfu", rank="0")
    assert mfu == pytest.approx(TARGET, rel=0.05)
    for rank in ("1", "2", "3"):
        assert exporter.value("npu_job_model_flops_utilization_ratio", job_name="mfu", rank=rank) is None, rank


def test_mfu_is_served_on_a_910b3_with_no_peak_configured(start_exporter):
    exporter = start_exporter("--npu-smi.details=common")  # `-t common`: the chips' AI core count and rated clock
    exporter.wait_value("npu_peak_flops_per_second", DERIVED, device="2", precision="bf16", source="derived")
    common = {"url": exporter.url, "world_size": 1, "flush_interval": 0.05}
    _loop(Monitor("derived", rank=0, device=2, flops_per_step=FLOPS, **common))
    exporter.wait_value("npu_job_iterations_total", 40, job_name="derived", rank="0")
    mfu = exporter.value("npu_job_model_flops_utilization_ratio", job_name="derived", rank="0")
    assert mfu == pytest.approx(FLOPS / STEP / DERIVED, rel=0.05)  # 0.45 of 313 T is 0.48 of 294.9 T


def test_a_step_can_override_the_declared_flops():
    mon = Monitor("override", flops_per_step=1e12, enabled=True, url="http://127.0.0.1:9")
    with mon.step(flops=5e12):
        pass
    with mon.step():
        pass
    events = list(mon._sender.buf)
    mon.close(timeout=0)
    flops = [step_json(e, 0.0, mon.flops_per_step)["flops"] for e in events]
    assert flops == [5e12, 1e12]
    assert "flops" not in step_json(events[0][:4], 0.0, None)  # nothing declared: nothing sent


def test_bad_declarations_are_ignored_with_a_warning(caplog):
    mon = Monitor("bad", flops_per_step=-1, precision="fp8", enabled=False)
    assert mon.flops_per_step is None and mon.precision == "bf16"
    assert "flops_per_step" in caplog.text and "fp8" in caplog.text
