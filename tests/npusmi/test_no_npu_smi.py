"""A node whose npu-smi is missing: nothing is simulated, no source reports success, and the
exporter stays ready so that Prometheus keeps scraping the failure (docs/install.md)."""

from __future__ import annotations

from tests.support.exposition import value


def test_a_missing_npu_smi_is_served_as_a_failure_not_as_chips(start, tmp_path):
    exporter = start(
        "--npu-smi", str(tmp_path / "no-npu-smi"), "--no-hccn.enabled", "--no-collector.pods", "--npu-smi.detail-interval", "1s"
    )
    found = exporter.wait_for(lambda f: (value(f, "cann_exporter_source_runs_total", source="npu_smi_details") or 0) >= 1)
    for source in ("npu_smi_info", "npu_smi_details", "npu_smi_inventory"):
        assert value(found, "cann_exporter_source_success", source=source) == 0, source
    assert value(found, "cann_exporter_source_errors_total", source="npu_smi_info", reason="not_found") >= 1
    assert value(found, "cann_exporter_source_errors_total", source="npu_smi_details", reason="no_chips") >= 1
    assert not value(found, "cann_exporter_simulated")  # absent (or 0): nothing simulated
    assert not [name for name, _ in found if name.startswith("npu_") and name != "npu_devices"]
    assert exporter.get("/readyz")[0] == 200
