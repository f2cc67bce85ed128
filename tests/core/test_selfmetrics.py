"""The exporter's own metrics from a StatusPart."""

from __future__ import annotations

from exporter.core.health import SourceStatus
from exporter.core.selfmetrics import StatusCollector, StatusPart
from tests.support.exposition import exposition, render, value, values


def test_source_self_metrics():
    status = SourceStatus(
        "npu_smi_info", runs=3, success=False, duration_seconds=0.25, last_success_timestamp=1700000000.0, errors={"timeout": 2}
    )
    text = exposition(StatusCollector(), StatusPart(sources=(status,)))
    assert 'cann_exporter_source_errors_total{reason="timeout",source="npu_smi_info"} 2.0' in text
    assert 'cann_exporter_source_success{source="npu_smi_info"} 0.0' in text
    assert 'cann_exporter_source_duration_seconds{source="npu_smi_info"} 0.25' in text
    assert 'cann_exporter_source_last_success_timestamp_seconds{source="npu_smi_info"} 1.7e+09' in text
    assert 'cann_exporter_source_runs_total{source="npu_smi_info"} 3.0' in text


def test_simulator_build_and_withheld_chips():
    found = render(StatusCollector(), StatusPart(simulated=("degraded", "a3"), stale_chips=2, version="9.9", python_version="3.11.7"))
    assert value(found, "cann_exporter_simulated", scenario="degraded", model="a3") == 1
    assert value(found, "cann_exporter_build_info", version="9.9", python_version="3.11.7") == 1
    assert value(found, "cann_exporter_stale_chips") == 2
    assert not StatusPart().simulated and value(render(StatusCollector(), StatusPart()), "cann_exporter_simulated") is None


def test_a_partial_failure_names_its_subjects_and_counts_the_rest():
    from exporter.core.health import Failure, SourceHealth

    health = SourceHealth("npu_smi_details", clock=lambda: 1.0)
    tried = [f"{kind} -i {npu}" for npu in range(8) for kind in ("usages", "common")]
    health.record(0.5, [Failure("usages -i 3", "dcmi_init_failed", "ret is -8005")], tried)
    status = health.status()
    assert status.partial and not status.success and status.subjects == 16 and dict(status.failing) == {"usages -i 3": "dcmi_init_failed"}
    found = render(StatusCollector(), StatusPart(sources=(status,)))
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 0
    assert value(found, "cann_exporter_source_subjects", source="npu_smi_details") == 16
    assert value(found, "cann_exporter_source_failed_subjects", source="npu_smi_details") == 1
    assert (
        value(found, "cann_exporter_source_subject_failing", source="npu_smi_details", subject="usages -i 3", reason="dcmi_init_failed")
        == 1
    )
    # recovered: the subject's series is gone, the counts say 0 of 16
    health.record(0.5, [], tried)
    found = render(StatusCollector(), StatusPart(sources=(health.status(),)))
    assert value(found, "cann_exporter_source_failed_subjects", source="npu_smi_details") == 0
    assert values(found, "cann_exporter_source_subject_failing", "subject") == {}
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 1


def test_failing_subjects_are_capped_per_source():
    from exporter.core.health import Failure, SourceHealth
    from exporter.core.selfmetrics import MAX_FAILING_SUBJECTS

    health = SourceHealth("npu_smi_details")
    tried = [f"usages -i {npu}" for npu in range(40)]
    health.record(0.5, [Failure(s, "timeout", "") for s in tried], tried)
    found = render(StatusCollector(), StatusPart(sources=(health.status(),)))
    assert value(found, "cann_exporter_source_failed_subjects", source="npu_smi_details") == 40
    assert not health.status().partial
    text = exposition(StatusCollector(), StatusPart(sources=(health.status(),)))
    assert text.count("cann_exporter_source_subject_failing{") == MAX_FAILING_SUBJECTS
