"""Hostile profile directories, in process: what anyone who can write into a watched directory
can put there (a /dev/zero or FIFO in place of a file, one endless line, symlinks out of the
directory, an export the exporter cannot list, thousands of exports) costs that export only,
with its reason counted; and `once` reports every finished export in its single scan."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest

import exporter.profiles.layout as layout
from exporter.core.health import HealthRegistry
from exporter.profiles.formats.budget import Budget
from exporter.profiles.formats.csvtable import MAX_ROWS
from exporter.profiles.formats.tables import (
    MAX_KERNEL_GROUPS,
    read_kernels,
    read_step_trace,
)
from exporter.profiles.formats.trace import read_trace
from exporter.profiles.options import ProfilesOptions
from exporter.profiles.source import ProfileSource
from tests.support.profile_builders import Step, torch_profile
from tests.support.profile_exports import PT_LEVEL1, build
from tests.support.profile_source import errors, jobs, scanned, source_for

OUT = "ASCEND_PROFILER_OUTPUT"


def good_export(tmp_path: Path, job: str = "good") -> Path:
    return build(tmp_path / "watched" / job / "host_1_ascend_pt", PT_LEVEL1)


async def test_dev_zero_in_place_of_profiler_info(tmp_path: Path) -> None:
    good_export(tmp_path)
    zero = good_export(tmp_path, "zero")
    (zero / "profiler_info_0.json").unlink()
    (zero / "profiler_info_0.json").symlink_to("/dev/zero")
    source, health = source_for(tmp_path)
    await scanned(source)
    assert errors(health) == {"outside_root": 1}  # /dev/zero is not under the watched directory
    assert jobs(source) == {"good", "zero"}  # the rest of the export is still used

    allowed, health = source_for(tmp_path, allow_outside=True)
    await scanned(allowed)
    assert errors(health) == {"not_regular": 1} and jobs(allowed) == {"good", "zero"}


async def test_fifo_in_place_of_a_data_file_does_not_block(tmp_path: Path) -> None:
    export = good_export(tmp_path, "fifo")
    (export / OUT / "step_trace_time.csv").unlink()
    os.mkfifo(export / OUT / "step_trace_time.csv")  # no writer: a plain open() would block for ever
    source, health = source_for(tmp_path)
    await scanned(source)
    assert errors(health) == {"not_regular": 1}
    (summary,) = source.latest_summaries()
    assert summary.max_operator_ratio is not None  # kernel_details.csv was still read


async def test_one_endless_line_costs_one_capped_line(tmp_path: Path) -> None:
    export = torch_profile(tmp_path / "watched" / "giant" / "host_1_ascend_pt", steps=[Step(1, 80.0, 0.0, 20.0)], trace=False)
    kernels = export / OUT / "kernel_details.csv"
    with open(kernels, "wb") as handle:
        handle.write(b"Step Id,Name,Type,Accelerator Core,Duration(us)\n1,")
        handle.truncate(400 << 20)  # sparse: a 400 MB line without an end costs no disk
    source, health = source_for(tmp_path)
    tracemalloc.start()
    try:
        await scanned(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert errors(health) == {"line_too_long": 1}
    assert peak < 32 << 20  # the 1 MiB line cap, a few times over for decoding: not 400 MB
    (summary,) = source.latest_summaries()
    assert summary.compute_ratio == pytest.approx(0.8)  # step_trace_time.csv still used


async def test_symlinks_out_of_the_watched_directory(tmp_path: Path) -> None:
    outside = build(tmp_path / "elsewhere" / "host_9_ascend_pt", PT_LEVEL1)
    (tmp_path / "watched" / "escape").mkdir(parents=True)
    (tmp_path / "watched" / "escape" / "host_9_ascend_pt").symlink_to(outside)  # a whole export
    linked = good_export(tmp_path, "linked")
    (linked / OUT / "kernel_details.csv").unlink()
    (linked / OUT / "kernel_details.csv").symlink_to(outside / OUT / "kernel_details.csv")  # one file
    inside = good_export(tmp_path, "inside")
    (inside / OUT / "op_statistic.csv").unlink()
    (inside / OUT / "op_statistic.csv").symlink_to(linked / OUT / "op_statistic.csv")  # stays inside: fine
    source, health = source_for(tmp_path)
    await scanned(source)
    (status,) = health.statuses()
    assert dict(status.failing) == {str(tmp_path / "watched" / "escape" / "host_9_ascend_pt"): "outside_root", str(linked): "outside_root"}
    assert errors(health) == {"outside_root": 3}  # the file once (parsed once), the directory on each scan
    assert jobs(source) == {"linked", "inside"}

    allowed, health = source_for(tmp_path, allow_outside=True)
    await scanned(allowed)
    assert errors(health) == {} and jobs(allowed) == {"escape", "linked", "inside"}


async def test_an_export_that_cannot_be_listed_costs_itself_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root lists whatever the mode, so the listing fails here; test_hostile_exporter.py does it
    for real with a chmod 000 directory and an exporter without the capability to override it."""
    good_export(tmp_path)
    locked = good_export(tmp_path, "locked")
    source, health = source_for(tmp_path)
    await scanned(source)
    assert jobs(source) == {"good", "locked"}
    real = layout._stat_files

    def denied(directory: Path, *budgets):
        if Path(directory).is_relative_to(locked):
            raise PermissionError(13, "Permission denied", str(directory))
        return real(directory, *budgets)

    monkeypatch.setattr(layout, "_stat_files", denied)
    await scanned(source)
    (status,) = health.statuses()
    assert dict(status.failing) == {str(locked): "permission_denied"}
    assert jobs(source) == {"good", "locked"}  # nothing is forgotten for a directory that cannot be read


async def test_series_caps_drop_the_oldest_and_count(tmp_path: Path) -> None:
    now = time.time()
    # newest first: A/rank0, B/rank0, C/rank0 (a third job: over max_jobs), A/rank1, B/rank1 (a fourth export)
    for age, (job, rank) in enumerate([("A", 0), ("B", 0), ("C", 0), ("A", 1), ("B", 1)]):
        export = torch_profile(tmp_path / "watched" / job / f"rank{rank}_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)])
        (export / f"profiler_info_{0}.json").unlink()  # its end time is the same in every export: mtimes decide
        for path in [export, *export.rglob("*")]:
            os.utime(path, (now - 100 - age, now - 100 - age))
    source, _ = source_for(tmp_path, max_exports=3, max_jobs=2)
    await scanned(source, 3)
    assert {(s.job_name, s.rank) for s in source.part().samples} == {("A", 0), ("B", 0), ("A", 1)}
    assert dict(source.part().dropped) == {"max_exports": 1, "max_jobs": 1}
    await scanned(source, 2)
    assert dict(source.part().dropped) == {"max_exports": 1, "max_jobs": 1}  # counted once, never parsed again


async def test_once_reports_every_finished_export_in_one_scan(tmp_path: Path) -> None:
    good_export(tmp_path, "marked")  # analyse.done
    settled = torch_profile(tmp_path / "watched" / "settled" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)], marker=False)
    past = time.time() - 120
    for path in settled.rglob("*"):
        os.utime(path, (past, past))
    torch_profile(tmp_path / "watched" / "writing" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)], marker=False)
    source, _ = source_for(tmp_path, single_scan=True, settle=30.0)
    await source.refresh()
    assert jobs(source) == {"marked", "settled"}  # the one still being written waits

    serve, _ = source_for(tmp_path, settle=30.0)
    await serve.refresh()
    assert jobs(serve) == set()  # serve keeps the two-scan rule


async def test_a_fifo_state_file_is_refused_without_blocking(tmp_path: Path) -> None:
    good_export(tmp_path)
    state = tmp_path / "state.json"
    os.mkfifo(state)
    health = HealthRegistry()
    source = ProfileSource(ProfilesOptions(dirs=(str(tmp_path / "watched"),), state_file=str(state)), health)
    await source.refresh()
    (status,) = health.statuses()
    assert status.failing == {str(state): "state_file"} and dict(status.errors) == {"state_file": 1}


def test_what_a_table_holds_does_not_grow_with_the_file() -> None:
    """Unique kernel names without a type (each its own group) and endless step rows: past the
    caps the rest is skipped with a too_large issue, and memory stays that of the caps. (The
    groups of unique names and steps need more than the default memory allowance: the caps are
    shown with a larger one; tests/profiles/test_budget.py shows the allowance.)"""

    def kernels(n: int):
        yield "Step Id,Name,Type,Accelerator Core,Duration(us)\n"
        yield from (f"{i},kernel_{i}x,N/A,AI_CORE,1.5\n" for i in range(n))

    def steps(n: int):
        yield "Step,Computing,Communication(Not Overlapped),Free\n"
        yield from (f"{i},1,2,3\n" for i in range(n))

    table = read_kernels(kernels(MAX_KERNEL_GROUPS + 10), budget=Budget(memory=128 << 20))
    assert len(table.steps) == MAX_KERNEL_GROUPS and table.rows == MAX_KERNEL_GROUPS + 10
    assert [i.reason for i in table.issues] == ["too_large"] and "10 rows skipped" in table.issues[0].message
    trace = read_step_trace(steps(MAX_ROWS + 10))
    assert len(trace.rows) == MAX_ROWS and [i.reason for i in trace.issues] == ["too_large"]


def test_an_object_style_trace_is_streamed_not_loaded(tmp_path: Path) -> None:
    """{"traceEvents": [...]} used to be loaded whole (64 MiB of JSON is several hundred MiB of
    objects); it is streamed event by event like the array form: memory is a read chunk."""
    other = '{"ph": "X", "name": "aclnnAdd", "pid": 1, "tid": 1, "ts": "1.0", "dur": 5, "args": {"x": "%s"}}' % ("y" * 40)
    path = tmp_path / "trace_view.json"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('{"schemaVersion": 1, "traceEvents": [')
        handle.write('{"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": "10", "dur": 5}')
        for _ in range(200):
            handle.write(("," + other) * 1000)
        handle.write("]}")
    tracemalloc.start()
    try:
        with open(path, encoding="utf-8") as handle:
            trace = read_trace(handle, path.name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert trace.events == 200_001 and len(trace.host_steps) == 1 and trace.issues == ()
    assert path.stat().st_size > 20 << 20 and peak < 10 << 20
