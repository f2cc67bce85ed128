"""Every real sample: indicators against values worked out by hand from the file.

The arithmetic is written out (durations copied from the rows), never a snapshot of
parser output. Kernel samples are trimmed copies (see the .src files), so sums are over
the rows that were kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.profiles.formats.info import (
    read_communication,
    read_job_name,
    read_profiler_info,
)
from exporter.profiles.formats.tables import (
    read_api_statistic,
    read_kernels,
    read_op_statistic,
    read_step_trace,
    read_task_time,
)
from exporter.profiles.formats.trace import read_trace
from exporter.profiles.indicators import summarize
from exporter.profiles.load import load_profile
from tests.support.profile_exports import fixture_path

approx = pytest.approx


def open_sample(name: str):
    return open(fixture_path(name), encoding="utf-8", newline="")


def text(name: str) -> str:
    return fixture_path(name).read_text(encoding="utf-8")


# --- step_trace_time.csv ----------------------------------------------------------------------


def test_level1_step_trace_crlf_no_device_id() -> None:
    with open_sample("pt_level1_step_trace_time.csv") as f:
        table = read_step_trace(f, "step_trace_time.csv")
    (row,) = table.rows
    assert (row.step, row.device_id, table.issues) == (50, None, ())
    assert row.computing_us == 8873.756000000001
    assert row.communication_not_overlapped_us == 101963.203
    assert row.free_us == 25744.050000000003
    assert row.preparing_us == 17902.5 and row.stage_us == 136581.0 and row.bubble_us == 0
    # docs/formats/profiler-exports.md, "step_trace_time.csv": Computing + Communication(Not Overlapped) + Free ≈ Stage + Bubble
    assert row.e2e_us == approx(8873.756000000001 + 101963.203 + 25744.050000000003)
    assert row.e2e_us == approx(136581.0 + 0, abs=0.01)


def test_level0_step_trace() -> None:
    with open_sample("pt_level0_step_trace_time.csv") as f:
        (row,) = read_step_trace(f).rows
    assert row.e2e_us == approx(8827.472999999998 + 81515.607 + 25908.102000000003)
    assert row.preparing_us == 19358.0


def test_cluster_step_trace_keeps_rank_rows_only() -> None:
    with open_sample("msa_cluster_step_trace_time.csv") as f:
        table = read_step_trace(f, "cluster_step_trace_time.csv")
    assert [r.rank for r in table.rows] == list(range(8))  # the Type=stage row is a max, not a rank
    rank0 = table.rows[0]
    assert rank0.step is None
    assert rank0.e2e_us == approx(80309.68717187493 + 683731.2897031249 + 990605.1042031233)
    assert rank0.e2e_us == approx(1754645.75, abs=0.5)  # ≈ Stage (Bubble 0)


# --- kernel_details.csv / op_summary ------------------------------------------------------------


def test_level1_kernels_by_type_hccl_apart() -> None:
    with open_sample("pt_level1_kernel_details.csv") as f:
        table = read_kernels(f)
    (step,) = table.steps
    assert step.step == 50 and table.rows == 30 and table.issues == ()
    conv = 313.886 + 158.603 + 78.222
    maxpool = 172.763 + 156.183
    transdata = 53.741 + 6.54 + 27.081 + 23.741 + 14.5 + 12.48 + 24.84 + 24.9 + 21.02 + 18.36 + 13.66 + 37.081 + 28.901 + 21.06
    relu = 15.5 + 13.02 + 9.96
    compute = conv + maxpool + transdata + relu + 12.18 + 11.9 + (3.4 + 2.12)  # + NLLLoss, TopKV2, DSAGenBitMask
    assert [(o.op_type, o.count) for o in step.op_types[:4]] == [("Conv2D", 3), ("MaxPoolWithArgmaxV1", 2), ("TransData", 14), ("Relu", 3)]
    assert step.op_types[0].total_us == approx(conv) and step.op_types[2].total_us == approx(transdata)
    assert step.compute_us == approx(compute)
    assert step.communication_us == approx(79089.52 + 2281.105 + 2402.388 + 22218.863)
    assert (step.longest_name, step.longest_us) == ("Conv2D1", 313.886)


def test_level0_kernels_types_from_names() -> None:
    with open_sample("pt_level0_kernel_details.csv") as f:
        (step,) = read_kernels(f).steps
    types = {o.op_type: o for o in step.op_types}
    assert set(types) == {"Conv2D", "MaxPoolWithArgmaxV1", "TransData", "Relu"}  # Type is N/A at Level0
    assert types["Conv2D"].total_us == approx(315.746 + 157.183 + 78.142)
    assert types["TransData"].count == 13
    assert types["TransData"].total_us == approx(
        50.621 + 6.28 + 27.961 + 21.42 + 14.82 + 12.58 + 24.16 + 24.8 + 22.02 + 17.8 + 14.5 + 36.881 + 27.021
    )
    assert step.communication_us == approx(72994.438 + 2193.583 + 2489.529 + 7839.336)  # Accelerator Core HCCL


def test_old_arith_kernels_ai_cpu_counts_as_compute() -> None:
    with open_sample("msa_kernel_details_arith.csv") as f:
        (step,) = read_kernels(f).steps
    compute_rows = [
        607.98,
        3.14,
        1.84,
        1.84,
        7.96,
        2.1,
        16.88,
        1.54,
        10.04,
        1.86,
        2.22,
        1.54,
        1.88,
        1.52,
        2.38,
        1.38,
        1.86,
        1.62,
        115.52,
        1.68,
        1.62,
        47.06,
        5.84,
        48.38,
        237.48,
        87.74,
        197.54,
    ]
    assert step.step == 1
    assert step.compute_us == approx(sum(compute_rows))
    assert step.communication_us == approx(308926.68 + 62.94 + 1470.84)
    top = [(o.op_type, o.total_us) for o in step.op_types[:3]]
    assert top == [("ZerosLike", approx(607.98)), ("Add", approx(237.48)), ("Cast", approx(3.14 + 1.86 + 1.54 + 1.86 + 1.62 + 197.54))]


def test_pipeutil_kernels_quoted_start_time_with_tab() -> None:
    with open_sample("msa_kernel_details_pipeutil.csv") as f:
        (step,) = read_kernels(f).steps
    matmul_v3 = 501.17 + 516.991 + 514.87 + 504.071 + 521.31 * 4
    fa_grad = 762.215 + 763.215 + 757.095 + 755.915
    fa = 410.188 + 406.128 + 407.008 + 405.228 + 405.228
    matmul_v2 = 185.504 + 186.823 + 187.724 + 190.544
    add = 26.78 + 31.201 + 27.021 + 25.08 + 1.38 + 1.46 + 1.5 + 1.58
    assert [o.op_type for o in step.op_types] == ["MatMulV3", "FlashAttentionScoreGrad", "FlashAttentionScore", "MatMulV2", "Add"]
    assert step.compute_us == approx(matmul_v3 + fa_grad + fa + matmul_v2 + add)
    assert step.op_types[0].total_us == approx(matmul_v3)


def test_minimal_kernels_without_step_id() -> None:
    with open_sample("msa_kernel_details_minimal.csv") as f:
        (step,) = read_kernels(f).steps
    assert step.step is None
    types = {o.op_type: o.total_us for o in step.op_types}
    assert types["Cast"] == approx(932.0498 + 5.86 + 4.35)
    assert types["TransData"] == approx(7.77 + 23.98)
    assert types["Conv2D"] == approx(24.26) and types["Add"] == approx(1.22)


def test_msprof_op_summary() -> None:
    with open_sample("msprof_op_summary.csv") as f:
        table = read_kernels(f, "op_summary_20260605161737.csv")
    (step,) = table.steps
    assert (table.device_id, step.step) == (0, None)
    assert step.op_types[0].op_type == "main_kernel" and step.op_types[0].count == 3
    assert step.compute_us == approx(87139.380 + 86808.420 + 86846.720)


# --- the CANN statistics copies -------------------------------------------------------------------


def test_level1_op_statistic() -> None:
    with open_sample("pt_level1_op_statistic.csv") as f:
        stats = read_op_statistic(f)
    totals = [
        1959.079,
        1423.208,
        921.498,
        723.434,
        645.433,
        573.791,
        439.589,
        409.728,
        312.006,
        305.866,
        260.825,
        203.064,
        157.323,
        118.962,
        115.462,
        75.901,
        64.081,
        47.961,
        17.7,
        17.64,
        12.18,
        11.9,
        11.82,
        10.3,
        8.4,
        5.78,
        5.52,
        3.18,
        3.14,
        2.86,
    ]
    assert len(stats.op_types) == 30 and stats.device_id is None
    assert sum(o.total_us for o in stats.op_types) == approx(sum(totals))
    assert (stats.op_types[0].op_type, stats.op_types[0].count, stats.op_types[0].max_us) == ("ForeachAddList", 3, 706.614)


def test_msprof_op_statistic() -> None:
    with open_sample("msprof_op_statistic.csv") as f:
        stats = read_op_statistic(f)
    (only,) = stats.op_types
    assert (only.op_type, only.total_us, only.count, only.max_us, stats.device_id) == ("main_kernel", 260794.52, 3, 87139.38, 0)


def test_api_statistics_sorted_by_time() -> None:
    with open_sample("msprof_api_statistic.csv") as f:
        table = read_api_statistic(f)
    apis = table.rows
    assert table.issues == () and len(apis) == 30
    assert (apis[0].api, apis[0].level, apis[0].time_us, apis[0].count) == ("aclrtSynchronizeDeviceWithTimeout", "acl", 260663.05, 6)
    with open_sample("pt_level1_api_statistic.csv") as f:
        apis = read_api_statistic(f).rows
    assert (apis[0].api, apis[0].time_us) == ("Launch_Ffts", 474.41)


def test_msprof_task_time() -> None:
    with open_sample("msprof_task_time.csv") as f:
        tasks = read_task_time(f)
    assert tasks.by_type_us["MIX_AIC"] == approx(87141.960 + 86810.080 + 86849.340)
    assert tasks.by_type_us["TASK_TIMEOUT_SET"] == approx(93.980)
    assert tasks.memcpy_us == 0 and tasks.device_id == 0


# --- JSON ----------------------------------------------------------------------------------------


def test_level1_trace_memcpy_steps_overlap() -> None:
    with open_sample("pt_level1_trace_view_excerpt.json") as f:
        trace = read_trace(f)
    (step,) = trace.host_steps
    assert (step.step, step.start_us, step.duration_us) == (50, approx(1736408883686740.710), 155985.8)
    assert [(m.kind, m.duration_us) for m in trace.memcpy] == [("h2d_d2h", 840.07675), ("d2d", 0.72003125)]  # PCIE_DMA_SQE, SDMA_SQE
    (overlap,) = trace.overlaps
    assert (overlap.computing_us, overlap.communication_us, overlap.communication_not_overlapped_us, overlap.free_us) == (
        53.742,
        79089.52,
        185.344,
        104.202,
    )
    assert trace.events == 56 and trace.issues == ()


def test_msprof_timeline_free_scoped_to_busy_span() -> None:
    with open_sample("msprof_timeline_excerpt.json") as f:
        trace = read_trace(f, "msprof_20260605161734.json")
    (overlap,) = trace.overlaps
    assert overlap.device_id == 0  # process_labels "NPU 0", written after the events
    assert overlap.computing_us == approx(87139.38 + 86808.42 + 86846.72)
    assert overlap.free_us == approx(15381910.04 + 6958.74 + 6560.34)
    assert overlap.lead_free_us == 15381910.04  # start-up idle before the first kernel (profiler-exports.md, "Overlap Analysis")
    assert overlap.active_free_us == approx(6958.74 + 6560.34)
    assert trace.memcpy == () and trace.host_steps == ()


def test_old_trace_view_stream_id_and_other_task_type() -> None:
    with open_sample("msa_trace_view_old_excerpt.json") as f:
        trace = read_trace(f)
    (overlap,) = trace.overlaps
    assert (overlap.computing_us, overlap.free_us) == (1.35, 11.71)
    assert overlap.tail_free_us == 11.71 and overlap.active_free_us == 0  # the Free event follows the last kernel


def test_communication_json_ms_to_us() -> None:
    (step,) = read_communication(text("pt_level1_communication.json"))
    assert step.step == 50
    assert step.elapse_us == approx((79.08952021875 + 2.2811055625 + 2.402388 + 22.2188639375) * 1000)
    assert step.transit_us == approx((0.23918478124999998 + 1.2285845 + 2.0597811249999998 + 0.15580309375) * 1000)
    assert step.wait_us == approx((5.64663284375 + 0.0724014375 + 0.1884238125 + 0.033160625) * 1000)
    assert step.wait_us == approx(5.94061871875 * 1000)  # == the file's own "Total Op Info"


def test_profiler_info_and_metadata() -> None:
    info = read_profiler_info(text("pt_level1_profiler_info_0.json"))
    assert (info.rank, info.level) == (0, "Level1")
    assert info.collection_end == approx(1736408884023552840 / 1e9)
    assert read_profiler_info(text("pt_level0_profiler_info_0.json")).level == "Level0"
    assert read_job_name(text("pt_level1_profiler_metadata.json")) is None  # only ENV_VARIABLES


# --- whole profiles -> indicators ------------------------------------------------------------------


def test_level1_profile_indicators(pt_level1: Path) -> None:
    (data,) = load_profile(pt_level1, "torch_npu", "resnet")
    (summary,) = summarize(data, top_k=3)
    e2e = 8873.756000000001 + 101963.203 + 25744.050000000003
    assert (summary.job_name, summary.rank, summary.steps, summary.level) == ("resnet", 0, (50,), "Level1")
    assert summary.step_duration_seconds == approx(e2e / 1e6)
    assert summary.compute_ratio == approx(8873.756000000001 / e2e)
    assert summary.communication_ratio == approx(101963.203 / e2e)
    assert summary.idle_ratio == approx(25744.050000000003 / e2e)
    assert summary.memcpy_ratio == approx((840.07675 + 0.72003125) / e2e)
    assert dict(summary.memcpy_kind_ratios) == {"h2d_d2h": approx(840.07675 / e2e), "d2d": approx(0.72003125 / e2e)}
    assert summary.framework_overhead_ratio == approx(17902.5 / (17902.5 + e2e))
    compute = 1275.642  # test_level1_kernels_by_type_hccl_apart
    assert summary.top3_operator_ratio == approx((550.711 + 328.946 + 327.905) / compute)
    assert summary.max_operator_ratio == approx(550.711 / compute)
    assert [o.op_type for o in summary.top_operators] == ["Conv2D", "MaxPoolWithArgmaxV1", "TransData"]
    assert summary.communication_wait_ratio == approx(5.94061871875 / (5.94061871875 + 3.6833534999999995))
    assert summary.finished_at == approx(1736408884.02355284)
    assert summary.issues == ()


def test_level0_profile_has_no_memcpy_source(pt_level0: Path) -> None:
    (data,) = load_profile(pt_level0, "torch_npu", "resnet")
    (summary,) = summarize(data)
    e2e = 8827.472999999998 + 81515.607 + 25908.102000000003
    assert summary.memcpy_ratio is None and summary.memcpy_kind_ratios == ()  # no trace_view.json: absent, not 0
    assert summary.framework_overhead_ratio == approx(19358.0 / (19358.0 + e2e))
    conv, maxpool = 315.746 + 157.183 + 78.142, 166.463 + 156.223
    transdata = 50.621 + 6.28 + 27.961 + 21.42 + 14.82 + 12.58 + 24.16 + 24.8 + 22.02 + 17.8 + 14.5 + 36.881 + 27.021
    relu = 14.62 + 12.02
    assert summary.max_operator_ratio == approx(conv / (conv + maxpool + transdata + relu))
    assert summary.top3_operator_ratio == approx((conv + maxpool + transdata) / (conv + maxpool + transdata + relu))


def test_msprof_profile_indicators(msprof_profile: Path) -> None:
    (data,) = load_profile(msprof_profile, "msprof", "tilelang")
    (summary,) = summarize(data)
    computing = 87139.38 + 86808.42 + 86846.72
    e2e = computing + 0 + (6958.74 + 6560.34)  # the 15.38 s start-up Free is outside the busy span
    assert (summary.rank, summary.device_id, summary.steps) == (0, 0, ())
    assert summary.compute_ratio == approx(computing / e2e)
    assert summary.idle_ratio == approx((6958.74 + 6560.34) / e2e)
    assert summary.communication_ratio == 0
    assert summary.memcpy_ratio == 0  # the timeline was read and holds no MEMCPY_ASYNC
    assert summary.max_operator_ratio == 1.0 and summary.top3_operator_ratio == 1.0
    assert summary.framework_overhead_ratio is None
    assert summary.operator_source == "op_summary"


def test_cluster_output_one_summary_per_rank(cluster_output: Path) -> None:
    data = load_profile(cluster_output, "cluster", "llm")
    assert [d.rank for d in data] == list(range(8))
    (rank5,) = summarize(data[5])
    e2e = 81367.62001562494 + 756374.86 + 892836.8999843737
    assert rank5.communication_ratio == approx(756374.86 / e2e)
    assert rank5.step_duration_seconds == approx(e2e / 1e6)
    assert rank5.top3_operator_ratio is None  # a cluster file has no operator data
