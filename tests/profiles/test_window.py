"""The summary of a hooks' profiling window: torch.profiler traces (a real CPU trace written by
torch here; a CUDA trace in Kineto's layout), torch_npu windows read like watched exports, and
posted summaries merged with watched exports (the one produced last wins)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from exporter.profiles.formats.torch_trace import copy_kind, read_torch_trace
from exporter.profiles.indicators import summarize
from exporter.profiles.load import load_profile
from exporter.profiles.part import ProfilesPart
from exporter.profiles.posted import PostedProfiles, merged
from exporter.profiles.window import main, summarise_window, summary_document
from tests.support.profile_exports import PT_LEVEL1, build


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler CPU trace of three steps of matrix multiplications and a ReLU.

    The matrices are large (tens of milliseconds per multiplication) so that a preemption of
    the test process inside a cheap operator never outweighs them on a loaded machine."""
    torch = pytest.importorskip("torch")
    window = tmp_path_factory.mktemp("window")
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    profiler.start()
    for step in range(3):
        with torch.profiler.record_function(f"ProfilerStep#{step}"):
            for _ in range(4):
                c = a @ b
            c.relu_()
    profiler.stop()
    profiler.export_chrome_trace(str(window / "trace.json"))
    return window


def test_a_real_cpu_trace_gives_operator_self_times_and_steps(cpu_trace):
    trace = read_torch_trace(cpu_trace / "trace.json")
    assert [s.step for s in trace.host_steps] == [0, 1, 2]
    ops = {o.op_type: o for o in trace.cpu_ops}
    assert ops["aten::mm"].count == 12 and ops["aten::matmul"].count == 12
    # matmul only calls mm: its self time is a sliver of its span, mm's is nearly all of it
    assert ops["aten::matmul"].total_us < 0.05 * ops["aten::mm"].total_us
    assert trace.cpu_ops[0].op_type == "aten::mm"
    assert not trace.has_device and trace.issues == ()


def test_the_cpu_summary_has_operator_shares_and_no_device_figures(cpu_trace):
    summary = summarise_window(cpu_trace, "cpu", "job", 0)
    assert summary.top_operators[0].op_type == "aten::mm" and summary.max_operator_ratio > 0.7
    assert summary.step_count == 3 and summary.step_duration_seconds > 0
    assert (summary.compute_ratio, summary.idle_ratio, summary.memcpy_ratio, summary.communication_ratio) == (None,) * 4
    doc = summary_document(summary, "cpu")
    assert "compute_ratio" not in doc and "idle_ratio" not in doc and doc["operators"][0]["op_type"] == "aten::mm"
    assert sum(o["ratio"] for o in doc["operators"]) <= 1.0 + 1e-9  # float sums; the route allows 1e-6


def test_a_trace_cut_short_still_gives_what_came_before(cpu_trace, tmp_path):
    text = (cpu_trace / "trace.json").read_text()
    (tmp_path / "trace.json").write_text(text[: len(text) * 2 // 3])
    trace = read_torch_trace(tmp_path / "trace.json")
    assert trace.cpu_ops and [i.reason for i in trace.issues] == ["truncated"]


def _cuda_trace(path: Path) -> None:
    """Kineto's layout, as torch 2.x writes a CUDA window: one step, an aten::mm launching a
    kernel (linked by External id), an NCCL kernel, a host-to-device copy."""
    host, gpu = {"pid": 100, "tid": 100}, {"pid": 0, "tid": 7}
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", **host, "ts": 1000.0, "dur": 1000.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", **host, "ts": 1010.0, "dur": 50.0, "args": {"External id": 11}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", **host, "ts": 1070.0, "dur": 10.0, "args": {"External id": 12}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", **host, "ts": 1020.0, "dur": 5.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", **gpu, "ts": 1005.0, "dur": 50.0},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", **gpu, "ts": 1100.0, "dur": 400.0, "args": {"External id": 11}},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "vectorized_elementwise_kernel",
            **gpu,
            "ts": 1500.0,
            "dur": 100.0,
            "args": {"External id": 12},
        },
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32", **gpu, "ts": 1550.0, "dur": 250.0},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": events, "traceName": "x"}))


def test_a_cuda_window_gives_device_shares_by_launching_operator(tmp_path):
    _cuda_trace(tmp_path / "trace.json")
    summary = summarise_window(tmp_path, "cuda", "job", 1)
    assert [(o.op_type, round(o.ratio, 3)) for o in summary.top_operators] == [("aten::mm", 0.8), ("aten::add", 0.2)]
    # step 1000 us: compute 1100..1600 = 500, NCCL 1550..1800 of which 200 outside compute,
    # Free = the other 300 (the 50 us copy included, as on the NPU)
    assert summary.compute_ratio == pytest.approx(0.5)
    assert summary.communication_ratio == pytest.approx(0.2)
    assert summary.idle_ratio == pytest.approx(0.3)
    assert summary.memcpy_ratio == pytest.approx(0.05)
    assert dict(summary.memcpy_kind_ratios) == {"h2d": pytest.approx(0.05)}
    assert summary.step_duration_seconds == pytest.approx(1e-3)


def test_copy_kinds():
    assert [
        copy_kind(n)
        for n in ("Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pageable)", "Memcpy DtoD (Device -> Device)", "Memcpy PtoP")
    ] == ["h2d", "d2h", "d2d", "other"]


def test_an_npu_window_is_read_as_a_watched_export_is(tmp_path):
    export = build(tmp_path / "host_1_2_ascend_pt", PT_LEVEL1)
    window = summarise_window(tmp_path, "npu", "llama", 3)
    watched = summarize(load_profile(export, "torch_npu", "llama")[0])[0]
    assert window.rank == 3 and window.producer == "hooks"
    assert replace(window, rank=watched.rank, producer=watched.producer) == watched


def test_no_export_is_a_clear_failure(tmp_path, capsys):
    assert main([str(tmp_path), "--backend", "npu", "--wait", "0", "--nice", "0"]) == 1
    assert "no finished torch_npu export" in capsys.readouterr().err
    assert main([str(tmp_path), "--backend", "cpu", "--nice", "0"]) == 1


def test_posted_and_watched_summaries_of_a_rank_are_one_set(tmp_path):
    export = build(tmp_path / "r0_ascend_pt", PT_LEVEL1)
    watched = replace(summarize(load_profile(export, "torch_npu", "llama")[0])[0], rank=0, finished_at=1000.0)
    posted = PostedProfiles(clock=lambda: 2000.0)
    newer = replace(watched, max_operator_ratio=0.9, finished_at=1500.0, path="posted:llama/0")
    other = replace(watched, rank=1, max_operator_ratio=0.2, finished_at=1400.0, path="posted:llama/1")
    assert posted.offer(newer) is None and posted.offer(other) is None
    part = merged(ProfilesPart.latest([watched]), posted.summaries())
    assert [(s.rank, s.max_operator_ratio) for s in part.samples] == [(0, 0.9), (1, 0.2)]
    older = replace(newer, finished_at=900.0)
    assert merged(ProfilesPart.latest([watched]), [older]).samples[0].max_operator_ratio == watched.max_operator_ratio
    assert PostedProfiles(clock=lambda: 1500.0 + 86_401).offer(newer) is None
    expiring = PostedProfiles(clock=lambda: 1500.0)
    expiring.offer(newer)
    expiring.clock = lambda: 1500.0 + 86_401
    assert expiring.summaries() == ()  # a day after its window closed
