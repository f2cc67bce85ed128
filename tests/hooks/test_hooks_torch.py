"""exporter.hooks.torch: device events resolved lazily with query(), never a synchronize in the loop."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from exporter.hooks import Monitor  # noqa: E402
from exporter.hooks.torch import TorchMonitor, device_backend, device_label  # noqa: E402


class FakeDevice:
    """A device whose work completes only when the test says so; records every call."""

    def __init__(self) -> None:
        self.clock_ms = 0.0
        self.completed_ms = -1.0  # events recorded at or before this device time are done
        self.synchronize_calls = 0
        self.events_created = 0
        self.allocated = 1 << 30
        self.memory_reads = 0

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # noqa: N802 - mirrors torch.npu.Event
        assert enable_timing
        self.events_created += 1
        return FakeEvent(self)

    def advance(self, ms: float) -> None:
        self.clock_ms += ms

    def memory_allocated(self) -> int:
        self.memory_reads += 1
        return self.allocated

    def max_memory_allocated(self) -> int:
        return 2 * self.allocated


class FakeEvent:
    def __init__(self, device: FakeDevice) -> None:
        self.device = device
        self.at: float | None = None

    def record(self, stream=None) -> None:
        self.at = self.device.clock_ms

    def query(self) -> bool:
        return self.at is not None and self.at <= self.device.completed_ms

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "elapsed_time on an unfinished event would block"
        return end.at - self.at

    def synchronize(self) -> None:
        self.device.synchronize_calls += 1
        self.device.completed_ms = max(self.device.completed_ms, self.at)


class Captured(Monitor):
    """A Monitor that keeps what record_step/record_memory received instead of sending it."""

    def __init__(self) -> None:
        super().__init__("captured", url="http://127.0.0.1:9", enabled=False)
        self.steps: list[tuple] = []
        self.ends: list[tuple] = []  # (unix end, index) of each step
        self.phases: list[tuple] = []  # record_phase: (name, seconds)
        self.memory: list[tuple] = []

    def record_step(self, seconds, samples=None, phases=None, end=None, index=None) -> None:
        self.steps.append((seconds, samples, dict(phases or {})))
        self.ends.append((end, index))

    def record_phase(self, name, seconds, end=None) -> None:
        self.phases.append((name, seconds))

    def record_memory(self, allocated_bytes=None, max_allocated_bytes=None) -> None:
        self.memory.append((allocated_bytes, max_allocated_bytes))


def run_steps(tm: TorchMonitor, device: FakeDevice, count: int, step_ms: float = 10.0) -> None:
    for _ in range(count):
        with tm.step(samples=4):
            with tm.phase("h2d"):
                device.advance(2.0)
            with tm.phase("compute"):
                device.advance(step_ms - 3.0)
            device.advance(1.0)


def test_steps_are_reported_only_once_the_device_finished_them():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device)
    run_steps(tm, device, 5)
    assert captured.steps == []  # the device is "behind": nothing known yet
    device.completed_ms = device.clock_ms  # the device catches up
    run_steps(tm, device, 1)  # the next step's start resolves the earlier five
    assert len(captured.steps) == 5
    for seconds, samples, phases in captured.steps:
        assert seconds == pytest.approx(0.010)  # the device's time, not the host's
        assert samples == 4
        assert phases == pytest.approx({"h2d": 0.002, "compute": 0.007})
    assert device.synchronize_calls == 0
    tm.close()  # outside the loop a wait is fine
    assert len(captured.steps) == 6
    assert device.synchronize_calls == 1


def test_resolution_stops_at_the_first_unfinished_step():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device)
    run_steps(tm, device, 3)
    device.completed_ms = 15.0  # only the first step (0..10 ms) is done
    run_steps(tm, device, 1)
    assert len(captured.steps) == 1
    assert device.synchronize_calls == 0


def test_events_are_recycled():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device)
    for _ in range(50):
        run_steps(tm, device, 1)
        device.completed_ms = device.clock_ms
    assert len(captured.steps) == 49
    assert device.events_created <= 12  # 6 events per step, reused once resolved


def test_a_device_far_behind_falls_back_to_host_time():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device, max_pending=4)
    run_steps(tm, device, 10)
    assert len(captured.steps) == 6  # the oldest beyond max_pending, with host time
    assert all(phases == {} and seconds < 0.010 for seconds, _, phases in captured.steps)
    assert device.synchronize_calls == 0


def test_memory_is_read_at_a_low_rate():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device, memory_interval=3600)
    run_steps(tm, device, 100)
    assert device.memory_reads == 1
    assert captured.memory == [(1 << 30, 2 << 30)]


def test_broken_events_never_break_the_loop():
    class Broken(FakeDevice):
        def Event(self, enable_timing=False):  # noqa: N802
            raise RuntimeError("no events on this device")

    device, captured = Broken(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device)
    run_steps(tm, device, 3)
    assert len(captured.steps) == 3  # host time instead


def test_cpu_uses_host_time_through_the_plain_monitor():
    kind, backend = device_backend("cpu")
    assert (kind, backend) == ("cpu", None)
    captured = Captured()
    tm = TorchMonitor(monitor=captured, device="cpu")
    assert tm.step(samples=2) is captured.step(samples=2)
    assert tm.phase("h2d") is captured.phase("h2d")


def test_device_label_maps_through_visible_devices():
    assert device_label("npu", 1, {"ASCEND_RT_VISIBLE_DEVICES": "4,5"}) == "5"
    assert device_label("npu", 1, {}) == "1"
    assert device_label("npu", None, {}) is None
    assert device_label("npu", 3, {"ASCEND_RT_VISIBLE_DEVICES": "4,5"}) is None


def test_real_cpu_training_loop(sink):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tm = TorchMonitor("torch-cpu", url=sink.url, flush_interval=0.05)
    for _ in range(20):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        with tm.step(samples=len(x)):
            with tm.phase("compute"):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    tm.close()
    steps = sink.steps(job_name="torch-cpu")
    assert len(steps) == 20 and all(s["samples"] == 4 for s in steps)
    assert sink.batches[-1]["framework"] == "pytorch"


# --- goodput: each step's index and host end, phases between steps on the host ----------------------


def test_device_steps_are_placed_where_they_ended_on_the_host():
    device, captured = FakeDevice(), Captured()
    tm = TorchMonitor(monitor=captured, backend=device)
    ended = []
    for index in (7, 8):
        with tm.step(samples=4, index=index):
            device.advance(10.0)
        ended.append(time.time())
    time.sleep(0.05)  # resolved later than they ended
    device.completed_ms = device.clock_ms
    with tm.phase("save_checkpoint"):  # between steps: host-timed, after the finished steps
        time.sleep(0.01)
    assert [index for _, index in captured.ends] == [7, 8]
    for (end, _), host_end in zip(captured.ends, ended, strict=True):
        assert host_end - 0.02 <= end <= host_end  # not at the time they were resolved, 50 ms later
    tm.close()


def test_device_monitor_phases_between_steps_are_sent(sink):
    device = FakeDevice()
    tm = TorchMonitor("gt", backend=device, url=sink.url, flush_interval=0.05)
    with tm.step(samples=4, index=1):
        device.advance(10.0)
    device.completed_ms = device.clock_ms
    with tm.phase("checkpoint"):
        time.sleep(0.01)
    tm.record_phase("restore", 0.5)
    tm.close()
    assert [s.get("index") for s in sink.steps(job_name="gt")] == [1]
    assert [list(o["phases"]) for b in sink.batches for o in b.get("outside", ())] == [["checkpoint"], ["restore"]]
