"""Profile directories assembled from the copied real samples (tests/fixtures/profiling), laid
out the way torch_npu, msprof and msprof-analyze write them (docs/formats/profiler-exports.md,
"Producers and directory layouts")."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.paths import PROFILING_FIXTURES

FIXTURES = PROFILING_FIXTURES

PT_LEVEL1 = {
    "profiler_info_0.json": "pt_level1_profiler_info_0.json",
    "profiler_metadata.json": "pt_level1_profiler_metadata.json",
    "ASCEND_PROFILER_OUTPUT/step_trace_time.csv": "pt_level1_step_trace_time.csv",
    "ASCEND_PROFILER_OUTPUT/kernel_details.csv": "pt_level1_kernel_details.csv",
    "ASCEND_PROFILER_OUTPUT/op_statistic.csv": "pt_level1_op_statistic.csv",
    "ASCEND_PROFILER_OUTPUT/api_statistic.csv": "pt_level1_api_statistic.csv",
    "ASCEND_PROFILER_OUTPUT/trace_view.json": "pt_level1_trace_view_excerpt.json",
    "ASCEND_PROFILER_OUTPUT/communication.json": "pt_level1_communication.json",
}
PT_LEVEL0 = {
    "profiler_info_0.json": "pt_level0_profiler_info_0.json",
    "ASCEND_PROFILER_OUTPUT/step_trace_time.csv": "pt_level0_step_trace_time.csv",
    "ASCEND_PROFILER_OUTPUT/kernel_details.csv": "pt_level0_kernel_details.csv",
}
MSPROF = {
    "mindstudio_profiler_output/op_summary_20260605161737.csv": "msprof_op_summary.csv",
    "mindstudio_profiler_output/op_statistic_20260605161737.csv": "msprof_op_statistic.csv",
    "mindstudio_profiler_output/task_time_20260605161737.csv": "msprof_task_time.csv",
    "mindstudio_profiler_output/api_statistic_20260605161737.csv": "msprof_api_statistic.csv",
    "mindstudio_profiler_output/msprof_20260605161734.json": "msprof_timeline_excerpt.json",
}
CLUSTER = {"cluster_step_trace_time.csv": "msa_cluster_step_trace_time.csv"}


def fixture_path(name: str) -> Path:
    return FIXTURES / name


def build(target: Path, layout: dict[str, str], marker: bool = True) -> Path:
    """Copy samples byte for byte into ``target``; ``marker`` adds torch_npu's analyse.done."""
    for relative, sample in layout.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / sample, path)
    if marker and (target / "ASCEND_PROFILER_OUTPUT").is_dir():
        (target / "ASCEND_PROFILER_OUTPUT" / "analyse.done").touch()
    return target
