"""What the hooks send for goodput: each step's index, the process's start and /proc identity,
and phases run between steps (on their own, exclusive when nested); TorchMonitor places device
steps where they ended on the host and times phases between steps on the host; the MindSpore
callback lays a sink's steps one after the other with their indices. TorchMonitor's:
tests/hooks/test_hooks_torch.py."""

from __future__ import annotations

import os
import sys
import time
import types

import pytest

from exporter.hooks import Monitor
from exporter.hooks.identity import process_start
from tests.support.hooks import wait_until


def sent(sink, key: str) -> list[dict]:
    with sink.lock:
        return [entry for b in sink.batches for entry in b.get(key) or ()]


def test_steps_carry_their_index_and_batches_the_process_start(sink):
    mon = Monitor("g", url=sink.url, flush_interval=0.05, flops_per_step=1e9)
    for index in (1, 2, 2):
        with mon.step(samples=4, index=index):
            pass
    mon.record_step(0.5, index=3)
    mon.record_step(0.5)
    mon.record_step(0.5, index="no")  # not a number: sent without an index
    mon.close()
    steps = sink.steps(job_name="g")
    assert [s.get("index") for s in steps] == [1, 2, 2, 3, None, None]
    assert all(s["flops"] == 1e9 for s in steps)  # the declared FLOPs stay with an index
    batch = sink.batches[0]
    started, proc = process_start()
    assert batch["started"] == pytest.approx(started, abs=0.05) and batch["started"] <= time.time()
    if sys.platform == "linux":
        assert batch["proc"] == proc and proc.endswith(":" + open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])


def test_phases_between_steps_are_sent_on_their_own(sink):
    mon = Monitor("g", url=sink.url, flush_interval=0.05)
    with mon.phase("load_checkpoint"):  # before the first step: a restore
        time.sleep(0.01)
    with mon.step():
        with mon.phase("forward"):
            pass
    with mon.phase("save_checkpoint"):
        time.sleep(0.02)
        with mon.phase("data"):  # nested: exclusive, out of the save's time
            time.sleep(0.01)
    mon.record_phase("evaluate", 2.5)
    mon.close()
    outside = sent(sink, "outside")
    assert [sorted(o["phases"]) for o in outside] == [["load_checkpoint"], ["data", "save_checkpoint"], ["evaluate"]]
    save = outside[1]["phases"]
    assert save["save_checkpoint"] >= 0.02 and 0.01 <= save["data"] < save["save_checkpoint"]
    assert outside[2]["phases"]["evaluate"] == 2.5
    assert outside[0]["end"] <= outside[1]["end"] <= outside[2]["end"]
    assert [set(s.get("phases", {})) for s in sink.steps(job_name="g")] == [{"forward"}]  # nothing between steps in it


def test_a_disabled_monitor_sends_no_phase(sink):
    mon = Monitor("g", url=sink.url, enabled=False)
    with mon.phase("save"):
        pass
    mon.record_phase("save", 1.0)
    mon.close()
    assert sink.batches == []


def test_a_fork_child_reports_its_own_start(sink):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    mon = Monitor("g", url=sink.url, flush_interval=0.05)
    parent = mon.identity
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, repr((mon.identity.pid, mon.identity.started, mon.identity.proc)).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child_pid, started, proc = eval(os.read(read, 4096).decode())  # noqa: S307 - our own repr
    assert child_pid == pid and started >= parent.started
    assert proc != parent.proc or proc is None
    mon.close()


# --- MindSpore (its Callback stood in: MindSpore itself is not installed here) -------------------


def test_the_mindspore_callback_lays_a_sinks_steps_one_after_the_other(sink, monkeypatch):
    train = types.ModuleType("mindspore.train")
    train.__dict__["Callback"] = type("Callback", (), {"__init__": lambda self: None})
    monkeypatch.setitem(sys.modules, "mindspore", types.ModuleType("mindspore"))
    monkeypatch.setitem(sys.modules, "mindspore.train", train)
    monkeypatch.delitem(sys.modules, "exporter.hooks.mindspore", raising=False)
    from exporter.hooks.mindspore import CannExporterCallback

    params = types.SimpleNamespace(cur_step_num=0, train_dataset=None)
    context = types.SimpleNamespace(original_args=lambda: params)
    callback = CannExporterCallback("ms", url=sink.url, flush_interval=0.05)
    callback.on_train_begin(context)
    for current in (4, 8):  # sink mode: 4 iterations per callback
        callback.on_train_step_begin(context)
        time.sleep(0.02)
        params.cur_step_num = current
        callback.on_train_step_end(context)
    callback.on_train_end(context)
    wait_until(lambda: len(sink.steps(job_name="ms")) == 8, what="8 steps")
    steps = sink.steps(job_name="ms")
    assert [s["index"] for s in steps] == list(range(1, 9))
    for before, after in zip(steps[:4], steps[1:4], strict=False):
        assert after["end"] - before["end"] == pytest.approx(after["duration"], abs=1e-5)  # one after the other
