"""The exporter's own metrics from a StatusPart."""

from __future__ import annotations

from exporter.core.health import SourceStatus
from exporter.core.selfmetrics import StatusCollector, StatusPart
from tests.support.exposition import exposition, render, value


def test_source_self_metrics():
    status = SourceStatus("npu_smi_info", runs=3, success=False, duration_seconds=0.25,
                          last_success_timestamp=1700000000.0, errors={"timeout": 2})
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
