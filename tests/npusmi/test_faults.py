"""npu-smi misbehaving under a running exporter: hangs, slowness, dcmi errors, bad output.

Complements tests/commands/test_serve_e2e.py (hang basics, garbage, a chip gone and back): here the
hang is repeated and the exporter's fds, threads, zombies and strays are counted, and every
other fault kind is walked through on one exporter. Expected each time: serving continues,
stale data ages out, self-metrics and logs tell the story, recovery is automatic.
"""

from __future__ import annotations

import time

import psutil
import pytest

from tests.support.exposition import value, values
from tests.support.procs import lingering_zombies, running, strays

pytestmark = pytest.mark.e2e


def errors(found: dict, source: str, reason: str) -> float:
    return value(found, "cann_exporter_source_errors_total", source=source, reason=reason) or 0


def quiet_fds(proc: psutil.Process, samples: int = 8) -> int:
    """Open fds between calls: the minimum over a few samples (an npu-smi call in flight holds pipes)."""
    counts = []
    for _ in range(samples):
        counts.append(proc.num_fds())
        time.sleep(0.06)
    return min(counts)


def all_up(found: dict) -> bool:
    return len(values(found, "npu_up", "npu")) == 8 and set(values(found, "npu_up", "npu").values()) == {1.0}


def test_repeated_hangs_leak_nothing(start):
    # 3 s: long enough that a healthy call on a loaded machine never times out (the log must show
    # one timeout state, the hang's), short enough for four hangs in the deadline.
    exporter = start(
        "--simulate", "healthy", "--npu-smi.interval", "1s", "--npu-smi.timeout", "3s", "--npu-smi.details=", "--max-age", "3s"
    )
    exporter.wait_for(all_up)
    proc = psutil.Process(exporter.proc.pid)
    fds_before, threads_before = quiet_fds(proc), proc.num_threads()

    exporter.fault("hang")  # every call: npu-smi and the child it started block forever
    found = exporter.wait_for(lambda f: errors(f, "npu_smi_info", "timeout") >= 4, deadline=40)
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 0
    in_flight = running(exporter.proc.pid)
    assert len(in_flight) <= 2 * 2  # at most the call in flight (simulator + its sleep), never one per hang
    assert strays(exporter) == []  # every killed call took its grandchild with it
    found = exporter.wait_for(lambda f: set(values(f, "npu_up", "npu").values()) == {0.0})  # aged out
    assert values(found, "npu_aicore_utilization_ratio", "npu") == {}
    assert exporter.get("/healthz")[0] == 200

    exporter.fault("")
    exporter.wait_for(lambda f: all_up(f) and value(f, "cann_exporter_source_success", source="npu_smi_info") == 1)
    end = time.monotonic() + 15
    while (fds := quiet_fds(proc)) > fds_before:  # bounded: the last killed call may still be reaped
        assert time.monotonic() < end, f"fds {fds_before} -> {fds}: a hang leaked file descriptors"
    # asyncio's default executor may add a worker when two to_thread calls overlap (a scrape's render,
    # the owners' procfs walk); a thread per hang would be 4 or more.
    assert proc.num_threads() <= threads_before + 2
    assert lingering_zombies(exporter.proc.pid) == []
    assert strays(exporter) == []
    log = exporter.log_path.read_text()
    assert log.count("subject=info reason=timeout") == 1  # once per state change, not per hang
    assert "source recovered" in log


def test_every_fault_kind_in_turn_then_recovery(start):
    # A 5 s timeout: a healthy simulated call on a loaded machine (load 4 on 2 cores) can take over
    # a second, and each such timeout would be one more logged state than the faults make.
    exporter = start(
        "--simulate",
        "healthy",
        "--npu-smi.interval",
        "1s",
        "--npu-smi.timeout",
        "5s",
        "--npu-smi.details=usages",
        "--npu-smi.detail-interval",
        "1s",
        "--max-age",
        "3s",
    )
    found = exporter.wait_for(lambda f: all_up(f) and len(values(f, "npu_aicpu_utilization_ratio", "npu")) == 8)

    def next_error(spec: str, source: str, reason: str) -> dict:
        before = errors(found, source, reason)
        exporter.fault(spec)
        return exporter.wait_for(lambda f: errors(f, source, reason) > before)

    # Slow but within the timeout: data keeps flowing and the duration shows it.
    exporter.fault("info:slow=0.5")
    found = exporter.wait_for(lambda f: (value(f, "cann_exporter_source_duration_seconds", source="npu_smi_info") or 0) >= 0.5)
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 1 and all_up(found)
    found = next_error("info:slow=8", "npu_smi_info", "timeout")  # slower than the timeout
    # The real dcmi texts, non-zero exit, on every command (details too).
    found = next_error("error-8005", "npu_smi_info", "dcmi_init_failed")
    found = exporter.wait_for(lambda f: errors(f, "npu_smi_details", "dcmi_init_failed") >= 1)
    found = next_error("error-8020", "npu_smi_info", "device_busy")
    found = next_error("info:truncate", "npu_smi_info", "truncated")
    found = next_error("info:garbage,info:exit=0", "npu_smi_info", "garbled")  # noise, and a zero exit
    found = next_error("info:error-8005,info:exit=0", "npu_smi_info", "dcmi_init_failed")  # exit codes lie
    found = next_error("info:exit=3", "npu_smi_info", "exit_status")  # a normal table, non-zero exit
    found = next_error("info:huge", "npu_smi_info", "output_too_large")  # 8 MiB > the 4 MiB cap
    # Through all of it /metrics answered; the last good values aged out.
    found = exporter.wait_for(lambda f: set(values(f, "npu_up", "npu").values()) == {0.0})
    assert values(found, "npu_aicore_utilization_ratio", "npu") == {}
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 0

    exporter.fault("")
    found = exporter.wait_for(
        lambda f: (
            all_up(f)
            and len(values(f, "npu_aicpu_utilization_ratio", "npu")) == 8
            and value(f, "cann_exporter_source_success", source="npu_smi_details") == 1
        )
    )
    assert value(found, "cann_exporter_source_success", source="npu_smi_info") == 1

    log = exporter.log_path.read_text()
    assert "dcmi module initialize failed. ret is -8005" in log  # the real message reaches the log
    assert "because the device is used. ret is -8020" in log
    for reason, states in (
        ("timeout", 1),
        ("dcmi_init_failed", 2),
        ("device_busy", 1),
        ("truncated", 1),
        ("garbled", 1),
        ("exit_status", 1),
        ("output_too_large", 1),
    ):
        assert log.count(f"subject=info reason={reason} ") == states, reason  # once per state, not per cycle
    assert "source recovered" in log


def test_one_card_failing_names_itself_and_the_other_cards_stay_fresh(start):
    # max-age well above a round of eight per-card calls on a loaded machine (seconds): the seven
    # good cards must stay fresh however slow the machine, while card 3's values still age out.
    exporter = start(
        "--simulate",
        "healthy",
        "--npu-smi.interval",
        "1s",
        "--npu-smi.timeout",
        "2s",
        "--npu-smi.details=usages",
        "--npu-smi.detail-interval",
        "1s",
        "--max-age",
        "15s",
    )
    exporter.wait_for(lambda f: all_up(f) and len(values(f, "npu_aicpu_utilization_ratio", "npu")) == 8)

    exporter.fault("usages@3:error-8005")  # `npu-smi info -t usages -i 3` only
    failing = {"source": "npu_smi_details", "subject": "usages -i 3", "reason": "dcmi_init_failed"}
    found = exporter.wait_for(
        lambda f: (
            value(f, "cann_exporter_source_subject_failing", **failing) == 1 and "3" not in values(f, "npu_aicpu_utilization_ratio", "npu")
        )
    )  # aged out
    assert value(found, "cann_exporter_source_success", source="npu_smi_details") == 0
    assert value(found, "cann_exporter_source_subjects", source="npu_smi_details") == 8
    assert value(found, "cann_exporter_source_failed_subjects", source="npu_smi_details") == 1
    assert set(values(found, "cann_exporter_source_subject_failing", "subject")) == {"usages -i 3"}
    # The other seven cards' usages stay fresh through several detail rounds; every chip is up.
    for _ in range(3):
        runs = value(found, "cann_exporter_source_runs_total", source="npu_smi_details")
        found = exporter.wait_for(lambda f, runs=runs: value(f, "cann_exporter_source_runs_total", source="npu_smi_details") > runs)
        assert set(values(found, "npu_aicpu_utilization_ratio", "npu")) == {"0", "1", "2", "4", "5", "6", "7"}
        assert all_up(found) and value(found, "cann_exporter_source_success", source="npu_smi_info") == 1
    assert 'subject="usages -i 3" reason=dcmi_init_failed' in exporter.log_path.read_text()

    exporter.fault("")
    found = exporter.wait_for(
        lambda f: (
            len(values(f, "npu_aicpu_utilization_ratio", "npu")) == 8
            and value(f, "cann_exporter_source_success", source="npu_smi_details") == 1
        )
    )
    assert value(found, "cann_exporter_source_failed_subjects", source="npu_smi_details") == 0
    assert values(found, "cann_exporter_source_subject_failing", "subject") == {}
