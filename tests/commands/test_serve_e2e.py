"""`cann-exporter serve` as a real process on the simulator, with faults injected under it.

Faults go through CANN_SIM_FAULT_FILE, which the simulator re-reads on every call, so one
running exporter sees npu-smi hang, print garbage, lose a chip and recover. Every wait is
a bounded poll of /metrics, never a fixed sleep that timing luck could break.
"""

from __future__ import annotations

import time

import pytest

from tests.support.exposition import value, values
from tests.support.procs import cmdline, descendants, lingering_zombies

pytestmark = pytest.mark.e2e


FAST = ["--npu-smi.interval", "1s", "--npu-smi.detail-interval", "2s", "--npu-smi.timeout", "3s", "--max-age", "8s"]


def test_serves_the_simulator_and_becomes_ready(start):
    exporter = start("--simulate", "underutilized", *FAST)
    found = exporter.wait_for(lambda f: value(f, "npu_devices") == 8 and len(values(f, "npu_aicpu_utilization_ratio", "device")) == 8)
    assert exporter.get("/readyz")[0] == 200
    assert exporter.get("/healthz")[0] == 200
    util = values(found, "npu_aicore_utilization_ratio", "device")
    assert {d for d, v in util.items() if v < 0.6} == {"1", "4"}  # the scenario's documented chips
    assert all(v > 0.85 for d, v in util.items() if d not in ("1", "4"))
    assert value(found, "cann_exporter_simulated", scenario="underutilized", model="910b3") == 1


def test_degraded_node(start):
    exporter = start("--simulate", "degraded", *FAST)
    found = exporter.wait_for(
        lambda f: (value(f, "cann_exporter_source_errors_total", source="npu_smi_details", reason="dcmi_init_failed") or 0) >= 2
    )
    assert value(found, "npu_devices") == 7  # NPU 7 is missing
    assert value(found, "npu_health", device="2", state="Critical") == 1
    # -t usages/-t common fail for NPU 5 only: its overview values stay, its details are absent.
    assert value(found, "npu_aicore_utilization_ratio", npu="5") is not None
    assert value(found, "npu_aicpu_utilization_ratio", npu="5") is None
    assert value(found, "npu_aicpu_utilization_ratio", npu="4") is not None


def test_faults_under_a_running_exporter(start):
    # No hccn_tool calls: their short-lived children would show up in the child/zombie checks.
    exporter = start("--simulate", "healthy", *FAST, "--npu-smi.details=usages", "--no-hccn.enabled")
    exporter.wait_for(lambda f: value(f, "npu_devices") == 8)

    # npu-smi hangs: killed at the timeout (with the child it started), serving continues.
    exporter.fault("info:hang")
    found = exporter.wait_for(lambda f: (value(f, "cann_exporter_source_errors_total", source="npu_smi_info", reason="timeout") or 0) >= 2)
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 0
    # Stale data ages out: after max age no chip is served as up.
    found = exporter.wait_for(lambda f: set(values(f, "npu_up", "npu").values()) == {0.0}, deadline=30)
    assert values(found, "npu_aicore_utilization_ratio", "npu") == {}
    hung = [p for p in descendants(exporter.proc.pid) if "sleep" in cmdline(p)]
    assert len(hung) <= 1  # at most the call in flight; killed ones do not pile up

    # Garbage, then a truncated table: counted by reason.
    exporter.fault("info:garbage")
    exporter.wait_for(lambda f: (value(f, "cann_exporter_source_errors_total", source="npu_smi_info", reason="garbled") or 0) >= 1)

    # Recovery is automatic.
    exporter.fault("")
    exporter.wait_for(
        lambda f: set(values(f, "npu_up", "npu").values()) == {1.0} and value(f, "cann_exporter_source_success", source="npu_smi_info") == 1
    )

    # A chip disappears: it is reported down, the others stay correct; then it comes back.
    exporter.fault("gone=3")
    found = exporter.wait_for(lambda f: value(f, "npu_devices") == 7)
    assert value(found, "npu_up", npu="3") == 0
    assert value(found, "npu_aicore_utilization_ratio", npu="3") is None
    assert len(values(found, "npu_aicore_utilization_ratio", "npu")) == 7
    exporter.fault("")
    exporter.wait_for(lambda f: value(f, "npu_devices") == 8 and value(f, "npu_up", npu="3") == 1)

    # Each failure state was logged once, not once per cycle.
    log = exporter.log_path.read_text()
    assert log.count("subject=info reason=timeout") == 1
    assert log.count("subject=info reason=garbled") == 1
    assert "source recovered" in log
    # No zombies or leftover npu-smi children once healthy again.
    assert lingering_zombies(exporter.proc.pid) == []


def test_scrape_does_not_wait_on_a_hung_npu_smi(start):
    exporter = start(
        "--simulate", "healthy", "--npu-smi.interval", "1s", "--npu-smi.timeout", "10s", "--npu-smi.details=", "--no-hccn.enabled"
    )  # only npu-smi children, so the process scan below sees no exiting ones
    exporter.wait_for(lambda f: value(f, "npu_devices") == 8)
    exporter.fault("info:hang")
    end = time.monotonic() + 30
    while not any("sleep" in cmdline(p) for p in descendants(exporter.proc.pid)):  # a call is now hanging
        assert time.monotonic() < end
        time.sleep(0.1)
    # The hung call holds for up to 10 s; a scrape that waited on it would miss this 5 s timeout.
    status, text = exporter.get("/metrics", timeout=5.0)
    assert status == 200
    assert "npu_up" in text


def test_profile_directory_is_wired(start, tmp_path):
    """--profile-dir turns a finished torch_npu export into npu_profile_* metrics, once."""
    from tests.support.profile_exports import PT_LEVEL1, build

    root = tmp_path / "profiles"
    build(root / "bert" / "host_1_20250109_ascend_pt", PT_LEVEL1)
    state = tmp_path / "profiles-state.json"
    exporter = start(
        "--simulate",
        "healthy",
        "--npu-smi.details=",
        "--profile-dir",
        str(root),
        "--profile-state-file",
        str(state),
        "--profiles.interval",
        "1s",
        "--profiles.settle",
        "1s",
    )
    found = exporter.wait_for(lambda f: values(f, "npu_profile_compute_ratio", "job_name") != {})
    assert 0 < next(iter(values(found, "npu_profile_compute_ratio", "job_name").values())) <= 1
    assert value(found, "cann_exporter_source_success", source="profiles") == 1
    assert state.exists()
