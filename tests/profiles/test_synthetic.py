"""Synthetic exports built with known shares must give exactly those shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.profiles.indicators import summarize
from exporter.profiles.layout import find_profiles
from exporter.profiles.load import load_profile
from exporter.thresholds.table import verdict
from tests.support.profile_builders import (
    Copy,
    Kernel,
    Step,
    msprof_profile,
    overlap_events,
    torch_profile,
    write,
)

approx = pytest.approx


def one(path: Path, producer: str = "torch_npu", per_step: bool = False, top_k: int = 5):
    (data,) = load_profile(path, producer, "job")
    return summarize(data, top_k=top_k, per_step=per_step)


def test_one_operator_at_75_percent(tmp_path: Path) -> None:
    kernels = [
        Kernel(1, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 500.0),
        Kernel(1, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 250.0),
        Kernel(1, "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 150.0),
        Kernel(1, "aclnnMul_MulAiCore_Mul", "Mul", "AI_VECTOR_CORE", 60.0),
        Kernel(1, "aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", 40.0),
        Kernel(1, "hcom_allReduce__1_0_1", "hcom_allReduce_", "HCCL", 5000.0),  # communication: excluded
    ]
    path = torch_profile(tmp_path / "r0_ascend_pt", steps=[Step(1, 1000.0, 0.0, 0.0)], kernels=kernels)
    (summary,) = one(path, top_k=2)
    assert summary.max_operator_ratio == 750.0 / 1000.0 == 0.75
    assert summary.top3_operator_ratio == approx((750.0 + 150.0 + 60.0) / 1000.0)
    assert [(o.op_type, o.ratio, o.count) for o in summary.top_operators] == [("MatMulV3", 0.75, 2), ("Add", 0.15, 1)]
    assert summary.kernel_time_seconds == approx(1000.0e-6)
    assert verdict("max_operator_share", summary.max_operator_ratio) == "abnormal"
    assert verdict("top3_operator_share", summary.top3_operator_ratio) == "warning"


def test_memory_copies_at_35_percent_split_by_kind(tmp_path: Path) -> None:
    steps = [Step(7, computing=500.0, not_overlapped=150.0, free=350.0, preparing=250.0)]
    copies = [
        Copy(10.0, 200.0, "PCIE_DMA_SQE", "host to device"),
        Copy(300.0, 50.0, "PCIE_DMA_SQE", "device to host"),
        Copy(400.0, 50.0, "SDMA_SQE"),  # D2D by queue when no operation
        Copy(500.0, 50.0, "PCIE_DMA_SQE"),  # PCIe, direction not recorded
    ]
    path = torch_profile(
        tmp_path / "r0_ascend_pt",
        steps=steps,
        host_steps=[(7, 0.0, 1200.0)],
        copies=copies,
        kernels=[Kernel(7, "k", "MatMul", "AI_CORE", 500.0)],
    )
    (summary,) = one(path)
    assert summary.memcpy_ratio == approx(350.0 / 1000.0)
    assert dict(summary.memcpy_kind_ratios) == {"h2d": approx(0.20), "d2h": approx(0.05), "d2d": approx(0.05), "h2d_d2h": approx(0.05)}
    assert (summary.compute_ratio, summary.communication_ratio, summary.idle_ratio) == (0.5, 0.15, 0.35)
    assert summary.framework_overhead_ratio == approx(250.0 / (250.0 + 1000.0))
    assert summary.step_duration_seconds == approx(1000.0e-6)
    assert verdict("memcpy_share", summary.memcpy_ratio) == "abnormal"


def test_steps_windows_and_copies_assigned_to_their_step(tmp_path: Path) -> None:
    steps = [Step(1, 600.0, 200.0, 200.0, 100.0), Step(2, 900.0, 0.0, 100.0, 0.0)]
    kernels = [Kernel(1, "a", "A", "AI_CORE", 600.0), Kernel(2, "b", "B", "AI_CORE", 900.0)]
    copies = [Copy(-50.0, 30.0), Copy(100.0, 100.0), Copy(1500.0, 40.0)]  # before step 1, in step 1, in step 2
    path = torch_profile(
        tmp_path / "r0_ascend_pt", steps=steps, kernels=kernels, host_steps=[(2, 1200.0, 1000.0), (1, 0.0, 1100.0)], copies=copies
    )
    whole, first, second = one(path, per_step=True)
    assert (whole.steps, first.steps, second.steps) == ((1, 2), (1,), (2,))
    assert whole.step_count == 2 and whole.step_duration_seconds == approx(1000.0e-6)
    assert whole.compute_ratio == approx((600.0 + 900.0) / 2000.0)  # ratio of sums over the window
    assert whole.memcpy_ratio == approx((100.0 + 40.0) / 2000.0)  # the copy before step 1 is not in a step
    assert first.memcpy_ratio == approx(100.0 / 1000.0) and second.memcpy_ratio == approx(40.0 / 1000.0)
    assert first.max_operator_ratio == 1.0 and first.top_operators[0].op_type == "A"
    assert whole.max_operator_ratio == approx(900.0 / 1500.0)
    assert first.framework_overhead_ratio == approx(100.0 / 1100.0)
    assert second.framework_overhead_ratio == 0.0


def test_mindspore_export_same_layout(tmp_path: Path) -> None:
    path = torch_profile(tmp_path / "worker_20250101_ascend_ms", steps=[Step(3, 850.0, 50.0, 100.0)], trace=False)
    refs, _ = find_profiles(tmp_path)
    assert [(r.producer, r.path) for r in refs] == [("mindspore", path)]
    (summary,) = one(path, "mindspore")
    assert summary.compute_ratio == 0.85 and summary.memcpy_ratio is None


def test_msprof_slices_concatenated_and_iterations(tmp_path: Path) -> None:
    kernels = [
        [Kernel(0, "k1", "FlashAttention", "MIX_AIC", 300.0)],
        [Kernel(0, "k2", "FlashAttention", "MIX_AIC", 100.0), Kernel(0, "k3", "Add", "AI_VECTOR_CORE", 100.0)],
    ]
    timeline = [
        overlap_events(9, [("Free", 0.0, 5000.0), ("Computing", 5000.0, 300.0), ("Free", 5300.0, 100.0)]),
        overlap_events(
            9,
            [
                ("Computing", 5400.0, 200.0),
                ("Communication", 5600.0, 100.0),
                ("Communication(Not Overlapped)", 5600.0, 100.0),
                ("Free", 5700.0, 800.0),
            ],
        ),
    ]
    path = msprof_profile(
        tmp_path / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP", kernels, timeline, iterations=[(1, 400.0, None), (2, 400.0, 40.0)]
    )
    (summary,) = one(path, "msprof")
    busy = 300.0 + 100.0 + 200.0 + 100.0  # lead Free (5000) and tail Free (800) are outside the busy span
    assert summary.compute_ratio == approx(500.0 / busy)
    assert summary.idle_ratio == approx(100.0 / busy)
    assert summary.communication_ratio == approx(100.0 / busy)
    assert summary.step_count == 2 and summary.step_duration_seconds == approx(busy / 2 * 1e-6)
    assert summary.top_operators[0].op_type == "FlashAttention" and summary.max_operator_ratio == approx(400.0 / 500.0)
    assert summary.framework_overhead_ratio == approx(40.0 / 400.0)  # Data Aug Bound over iterations that have it


def test_cluster_directory_of_ranks(tmp_path: Path) -> None:
    job = tmp_path / "llama"
    for rank, computing in ((0, 700.0), (1, 900.0)):
        torch_profile(job / f"host_{rank}_2025_ascend_pt", steps=[Step(5, computing, 1000.0 - computing, 0.0)], rank=rank)
    write(
        job / "cluster_analysis_output" / "cluster_step_trace_time.csv",
        "Step,Type,Index,Computing,Communication(Not Overlapped),Free\n,rank,0,1,1,1\n",
    )
    refs, failures = find_profiles(tmp_path)
    assert failures == []
    assert [(r.producer, r.job_name, r.path.name) for r in refs] == [
        ("torch_npu", "llama", "host_0_2025_ascend_pt"),
        ("torch_npu", "llama", "host_1_2025_ascend_pt"),
    ]
    ranks = [summarize(d)[0] for r in refs for d in load_profile(r.path, r.producer, r.job_name)]
    assert [(s.rank, s.compute_ratio) for s in ranks] == [(0, 0.7), (1, 0.9)]


def test_job_name_from_profiler_metadata(tmp_path: Path) -> None:
    path = torch_profile(tmp_path / "x_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)], metadata={"job_name": "bert-large"})
    (data,) = load_profile(path, "torch_npu", "directory-name")
    assert data.job_name == "bert-large"


def test_single_card_profiler_info_without_rank(tmp_path: Path) -> None:
    path = torch_profile(tmp_path / "x_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)], rank=None)
    (data,) = load_profile(path, "torch_npu", "job")
    assert data.rank is None  # rank_id -1 in profiler_info.json is "no rank", not a rank
