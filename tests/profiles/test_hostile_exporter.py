"""Hostile profile directories under a real `cann-exporter serve` on the simulator: the exporter
keeps serving every healthy export, counts each refusal by reason, stays small, and SIGTERM
ends it in time, also while a worker thread is stuck in a read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from exporter.core.shutdown import EXIT_WITHIN
from tests.support.exposition import value
from tests.support.profile_exports import PT_LEVEL1, build
from tests.support.serve import Exporter

OUT = "ASCEND_PROFILER_OUTPUT"
RSS_BOUND = 200 << 20  # the exporter idles near 50 MiB; reading the 400 MB line whole took 557 MiB
EXIT_BOUND = EXIT_WITHIN + 10
QUIET = ["--simulate", "healthy", "--npu-smi.details=", "--no-collector.network", "--profiles.interval", "1s"]


def without_dac_override() -> list[str] | None:
    """A launcher under which a chmod 000 directory is really unreadable: none needed for a
    normal user; for root, setpriv drops the capabilities that read through modes."""
    if os.geteuid() != 0:
        return [sys.executable, "-m", "exporter"]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-m", "exporter"]


def hostile_tree(root: Path, outside: Path) -> None:
    build(root / "good" / "host_1_ascend_pt", PT_LEVEL1)
    zero = build(root / "zero" / "host_2_ascend_pt", PT_LEVEL1)
    (zero / "profiler_info_0.json").unlink()
    (zero / "profiler_info_0.json").symlink_to("/dev/zero")
    (zero / OUT / "step_trace_time.csv").unlink()
    os.mkfifo(zero / OUT / "step_trace_time.csv")
    giant = build(root / "giant" / "host_3_ascend_pt", PT_LEVEL1)
    with open(giant / OUT / "kernel_details.csv", "wb") as handle:
        handle.write(b"Step Id,Name,Type,Accelerator Core,Duration(us)\n1,")
        handle.truncate(400 << 20)  # sparse: one 400 MB line
    build(outside / "host_4_ascend_pt", PT_LEVEL1)
    (root / "escape").mkdir()
    (root / "escape" / "host_4_ascend_pt").symlink_to(outside / "host_4_ascend_pt")
    locked = build(root / "locked" / "host_5_ascend_pt", PT_LEVEL1)
    locked.parent.chmod(0)


def errors_by_reason(found) -> dict[str, float]:
    return {
        dict(labels)["reason"]: v
        for (name, labels), v in found.items()
        if name == "cann_exporter_source_errors_total" and dict(labels).get("source") == "profiles"
    }


def test_hostile_exports_cost_themselves_only(tmp_path: Path) -> None:
    launcher = without_dac_override()
    if launcher is None:
        pytest.skip("running as root without setpriv: a chmod 000 directory cannot be made unreadable")
    root = tmp_path / "watched"
    hostile_tree(root, tmp_path / "elsewhere")
    exporter = Exporter([*QUIET, "--profile-dir", str(root)], tmp_path, launcher=launcher)
    try:
        wanted = {"outside_root", "not_regular", "line_too_long", "permission_denied"}

        def settled(found) -> bool:
            return value(found, "npu_profile_compute_ratio", job_name="good") is not None and wanted <= set(errors_by_reason(found))

        found = exporter.wait_for(settled, deadline=60)
        assert value(found, "npu_aicore_utilization_ratio", device="0") is not None  # chips still served
        served = {dict(labels)["job_name"] for (name, labels), _ in found.items() if name == "npu_profile_compute_ratio"}
        assert served == {"good", "zero", "giant"}  # a refused file costs that file; the rest of its export is used
        assert (
            value(
                found, "cann_exporter_source_subject_failing", source="profiles", subject=str(root / "locked"), reason="permission_denied"
            )
            == 1
        )
        assert psutil.Process(exporter.proc.pid).memory_info().rss < RSS_BOUND
        exporter.wait_for(lambda found: errors_by_reason(found)["permission_denied"] >= 3)  # every scan counts it
        log = exporter.log_path.read_text()
        assert "Traceback" not in log
        for reason in wanted - {"outside_root"}:  # one log line each while it lasts
            assert log.count(f"reason={reason}") == 1, reason
        started = time.monotonic()
        assert exporter.terminate_within(EXIT_BOUND) == 0
        assert time.monotonic() - started < EXIT_BOUND
    finally:
        (root / "locked").chmod(0o755)
        if exporter.proc.poll() is None:
            exporter.stop()


def test_the_profile_scan_starts_at_once_while_npu_smi_details_are_slow(tmp_path: Path) -> None:
    """Issue 45: with --profiles.interval 2s the first scan came about 2 minutes after start,
    behind the npu-smi detail rounds. Here every `-t usages` call takes 40 s (a stand-in npu-smi
    answering late): the export is served while no detail round has ended."""
    build(tmp_path / "watched" / "job" / "host_1_ascend_pt", PT_LEVEL1)
    (tmp_path / "faults").write_text("usages:slow=40")
    args = ["--simulate", "healthy", "--npu-smi.details=usages", "--npu-smi.timeout", "60s", "--no-collector.network"]
    exporter = Exporter([*args, "--profiles.interval", "1s", "--profile-dir", str(tmp_path / "watched")], tmp_path)
    try:
        found = exporter.wait_for(lambda found: value(found, "npu_profile_compute_ratio", job_name="job") is not None, deadline=30)
        assert not value(found, "cann_exporter_source_runs_total", source="npu_smi_details")  # the details still wait on npu-smi
    finally:
        exporter.stop()


def test_sigterm_ends_the_exporter_while_a_worker_is_stuck_in_a_read(tmp_path: Path) -> None:
    """The profile scan blocks for ever on a FIFO (the fault is built in by
    tests/support/stuck_exporter.py: the exporter's own readers no longer block on one). The test
    waits until the scan holds the FIFO."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "watched").mkdir()
    launcher = [sys.executable, "-m", "tests.support.stuck_exporter", str(fifo)]
    exporter = Exporter([*QUIET, "--profile-dir", str(tmp_path / "watched")], tmp_path, launcher=launcher)
    writer = None
    try:
        exporter.wait_for(lambda found: value(found, "npu_aicore_utilization_ratio", device="0") is not None)
        # The scan is stuck once it has the FIFO open: a writer can open it then (ENXIO before).
        # Held open and silent, the scan's read() blocks for ever.
        deadline = time.monotonic() + 60
        while writer is None:
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                assert time.monotonic() < deadline and exporter.proc.poll() is None, "the profile scan never opened the FIFO"
                time.sleep(0.05)
        assert exporter.terminate_within(EXIT_BOUND) == 0
        assert "worker threads still busy at exit" in exporter.log_path.read_text()
    finally:
        if writer is not None:
            os.close(writer)
        if exporter.proc.poll() is None:
            exporter.stop()


def test_sigterm_ends_the_exporter_during_a_long_parse(tmp_path: Path) -> None:
    """Issue 45: one SIGTERM during a large profile parse left the exporter running about 6
    minutes. Here the parse is real work, not a blocked read: a kernel_details.csv of 80 MB of
    blank lines (about 15 s of a core before the work budget refuses it). SIGTERM while the
    parse has the file open ends the process within EXIT_WITHIN (+ slack), saying why."""
    export = build(tmp_path / "watched" / "job" / "host_1_ascend_pt", PT_LEVEL1)
    table = export / OUT / "kernel_details.csv"
    with open(table, "wb") as handle:
        handle.write(b"Step Id,Name,Type,Accelerator Core,Duration(us)\n" + b"\n" * (80 << 20))
    exporter = Exporter([*QUIET, "--profile-dir", str(tmp_path / "watched")], tmp_path)
    try:
        process = psutil.Process(exporter.proc.pid)
        deadline = time.monotonic() + 60
        while not any(f.path == str(table) for f in process.open_files()):  # the parse is reading it
            assert time.monotonic() < deadline and exporter.proc.poll() is None, "the parse never opened the table"
            time.sleep(0.05)
        time.sleep(1.0)  # well inside the parse
        assert any(f.path == str(table) for f in process.open_files())
        start = time.monotonic()
        assert exporter.terminate_within(EXIT_BOUND) == 0
        took = time.monotonic() - start
        print(f"exit {took:.1f}s after SIGTERM during the parse")
        log = exporter.log_path.read_text()
        assert "worker threads still busy at exit" in log and "profile parsed" not in log
        assert took <= EXIT_WITHIN + 2, f"exit took {took:.1f}s"
    finally:
        if exporter.proc.poll() is None:
            exporter.stop()


def test_once_shows_finished_exports(tmp_path: Path) -> None:
    build(tmp_path / "watched" / "resnet" / "host_1_ascend_pt", PT_LEVEL1)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "once",
            "--simulate",
            "healthy",
            "--npu-smi.details=",
            "--no-collector.network",
            "--profile-dir",
            str(tmp_path / "watched"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert 'npu_profile_compute_ratio{job_name="resnet",rank="0"}' in done.stdout
