"""The npu_profile_* exposition, through prometheus_client on a private registry."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from exporter.app.catalogue import ALL_METRICS
from exporter.profiles import metrics as m
from exporter.profiles.collector import ProfileCollector
from exporter.profiles.indicators import OperatorShare, ProfileSummary, summarize
from exporter.profiles.load import load_profile
from exporter.profiles.part import ProfilesPart
from tests.support.exposition import exposition as render
from tests.support.profile_exports import PT_LEVEL1, build


def summary(**kw) -> ProfileSummary:
    base = dict(job_name="bert", rank=0, path="/p/a_ascend_pt", producer="torch_npu", finished_at=1_700_000_000.0)
    return ProfileSummary(**{**base, **kw})


def exposition(summaries) -> str:
    """The rendering of a part built as the source builds it: the latest summary per job and rank."""
    return render(ProfileCollector(), ProfilesPart.latest(summaries))


def samples(text: str, prefix: str = "npu_profile_") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(prefix)
    }


def test_full_summary_renders_every_metric() -> None:
    ops = (OperatorShare("MatMulV3", 750.0, 2, 0.75), OperatorShare("Add", 150.0, 1, 0.15))
    text = exposition(
        [
            summary(
                step_duration_seconds=0.1,
                compute_ratio=0.5,
                communication_ratio=0.15,
                idle_ratio=0.35,
                memcpy_ratio=0.35,
                memcpy_kind_ratios=(("d2d", 0.05), ("h2d", 0.3)),
                framework_overhead_ratio=0.2,
                top3_operator_ratio=0.96,
                max_operator_ratio=0.75,
                top_operators=ops,
            )
        ]
    )
    got = samples(text)
    rank = (("job_name", "bert"), ("rank", "0"))
    assert got[("npu_profile_step_duration_seconds", rank)] == 0.1
    assert got[("npu_profile_compute_ratio", rank)] == 0.5
    assert got[("npu_profile_communication_ratio", rank)] == 0.15
    assert got[("npu_profile_idle_ratio", rank)] == 0.35
    assert got[("npu_profile_memcpy_ratio", rank)] == 0.35
    assert got[("npu_profile_memcpy_kind_ratio", (("job_name", "bert"), ("kind", "h2d"), ("rank", "0")))] == 0.3
    assert got[("npu_profile_framework_overhead_ratio", rank)] == 0.2
    assert got[("npu_profile_top3_operator_ratio", rank)] == 0.96
    assert got[("npu_profile_max_operator_ratio", rank)] == 0.75
    assert (
        got[("npu_profile_operator_time_ratio", (("job_name", "bert"), ("op_type", "MatMulV3"), ("position", "1"), ("rank", "0")))] == 0.75
    )
    assert got[("npu_profile_operator_time_ratio", (("job_name", "bert"), ("op_type", "Add"), ("position", "2"), ("rank", "0")))] == 0.15
    assert got[("npu_profile_last_update_timestamp_seconds", rank)] == 1_700_000_000.0
    assert "# HELP npu_profile_memcpy_ratio Share of the step spent in memory copies" in text
    assert "# TYPE npu_profile_operator_time_ratio gauge" in text


def test_every_spec_is_described_and_names_match_design() -> None:
    names = {spec.name for spec in m.PROFILE_METRICS}
    assert names >= {
        "npu_profile_step_duration_seconds",
        "npu_profile_compute_ratio",
        "npu_profile_communication_ratio",
        "npu_profile_idle_ratio",
        "npu_profile_memcpy_ratio",
        "npu_profile_framework_overhead_ratio",
        "npu_profile_top3_operator_ratio",
        "npu_profile_max_operator_ratio",
        "npu_profile_operator_time_ratio",
        "npu_profile_last_update_timestamp_seconds",
    }
    assert set(m.PROFILE_METRICS) <= set(ALL_METRICS)
    assert all(spec.labels[:2] == ("job_name", "rank") for spec in m.PROFILE_METRICS if spec.name.startswith("npu_"))
    assert m.PROFILES_DROPPED in m.PROFILE_METRICS
    assert {spec.name for spec in ProfileCollector.specs} == names


def test_absent_values_are_absent_not_zero() -> None:
    text = exposition([summary(compute_ratio=0.9)])
    got = samples(text)
    assert got == {
        ("npu_profile_compute_ratio", (("job_name", "bert"), ("rank", "0"))): 0.9,
        ("npu_profile_last_update_timestamp_seconds", (("job_name", "bert"), ("rank", "0"))): 1_700_000_000.0,
    }


def test_latest_per_job_and_rank_wins_and_unknown_rank_is_empty() -> None:
    text = exposition(
        [
            summary(compute_ratio=0.1, finished_at=100.0, path="/old"),
            summary(compute_ratio=0.9, finished_at=200.0, path="/new"),
            summary(rank=1, compute_ratio=0.5),
            summary(job_name="single", rank=None, compute_ratio=0.7),
        ]
    )
    got = samples(text)
    assert got[("npu_profile_compute_ratio", (("job_name", "bert"), ("rank", "0")))] == 0.9
    assert got[("npu_profile_compute_ratio", (("job_name", "bert"), ("rank", "1")))] == 0.5
    assert got[("npu_profile_compute_ratio", (("job_name", "single"), ("rank", "")))] == 0.7


def test_real_sample_through_the_collector(tmp_path: Path) -> None:
    path = build(tmp_path / "resnet" / "r0_ascend_pt", PT_LEVEL1)
    (data,) = load_profile(path, "torch_npu", "resnet")
    text = exposition(summarize(data, top_k=3))
    e2e = 8873.756000000001 + 101963.203 + 25744.050000000003
    got = samples(text)
    rank = (("job_name", "resnet"), ("rank", "0"))
    assert abs(got[("npu_profile_compute_ratio", rank)] - 8873.756000000001 / e2e) < 1e-12
    assert got[("npu_profile_operator_time_ratio", (("job_name", "resnet"), ("op_type", "Conv2D"), ("position", "1"), ("rank", "0")))] > 0.4
    assert len([k for k in got if k[0] == "npu_profile_operator_time_ratio"]) == 3


def test_dropped_exports_are_counted_by_reason_from_zero() -> None:
    fresh = samples(render(ProfileCollector(), ProfilesPart.latest([summary()])), "cann_exporter_")
    assert fresh == {
        ("cann_exporter_profiles_dropped_total", (("reason", "max_exports"),)): 0.0,
        ("cann_exporter_profiles_dropped_total", (("reason", "max_jobs"),)): 0.0,
    }
    part = ProfilesPart.latest([summary()], (("max_exports", 3), ("max_jobs", 1)))
    got = samples(render(ProfileCollector(), part), "cann_exporter_")
    assert got[("cann_exporter_profiles_dropped_total", (("reason", "max_exports"),))] == 3.0
