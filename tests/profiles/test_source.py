"""The profile source: finished-export detection, parse-once, the state file, health."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import exporter.profiles.source as source_module
from exporter.core.health import HealthRegistry
from exporter.profiles.layout import find_profiles
from exporter.profiles.options import ProfilesOptions
from exporter.profiles.source import ProfileSource
from tests.support.profile_builders import Step, torch_profile, write
from tests.support.profile_exports import MSPROF, PT_LEVEL1, build

OUT = "ASCEND_PROFILER_OUTPUT"


class Counting:
    """Wraps load_profile to count parses."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[Path] = []
        real = source_module.load_profile

        def counted(path, *args, **kwargs):
            self.calls.append(path)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(source_module, "load_profile", counted)


def make_source(
    tmp_path: Path, roots: list[Path] | None = None, settle: float = 0.0, clock=time.time, **kw
) -> tuple[ProfileSource, HealthRegistry]:
    health = HealthRegistry()
    options = ProfilesOptions(
        dirs=tuple(str(r) for r in roots or [tmp_path / "profiles"]),
        state_file=str(tmp_path / "state" / "profiles.json"),
        settle=settle,
        **kw,
    )
    return ProfileSource(options, health, clock=clock), health


def age(directory: Path, seconds: float) -> None:
    """Make every file look ``seconds`` old (the quiet-time rule)."""
    past = time.time() - seconds
    for path in directory.rglob("*"):
        os.utime(path, (past, past))


def status(health: HealthRegistry):
    (only,) = health.statuses()
    return only


async def test_parsed_once_after_two_stable_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    build(tmp_path / "profiles" / "resnet" / "host_1_ascend_pt", PT_LEVEL1)
    (tmp_path / "profiles" / "resnet" / "host_1_ascend_pt" / OUT / "analyse.done").touch()
    source, health = make_source(tmp_path)
    await source.refresh()
    assert source.latest_summaries() == () and counting.calls == []  # first sight: wait for a second, identical scan
    await source.refresh()
    (summary,) = source.latest_summaries()
    assert (summary.job_name, summary.rank, summary.steps) == ("resnet", 0, (50,))
    for _ in range(3):
        await source.refresh()
    assert len(counting.calls) == 1
    assert status(health).success and status(health).errors == {}


async def test_state_file_survives_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build(tmp_path / "profiles" / "job" / "r0_ascend_pt", PT_LEVEL1)
    first, _ = make_source(tmp_path)
    await first.refresh()
    await first.refresh()
    state = json.loads((tmp_path / "state" / "profiles.json").read_text())
    assert state["version"] == 1 and list(state["profiles"]) == [str(tmp_path / "profiles" / "job" / "r0_ascend_pt")]

    counting = Counting(monkeypatch)
    second, health = make_source(tmp_path)
    await second.refresh()
    assert second.part() == first.part()  # served at once, from the state file
    await second.refresh()
    assert counting.calls == [] and status(health).success


async def test_export_still_being_written_is_not_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    now = [time.time()]
    root = tmp_path / "profiles"
    path = torch_profile(root / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)], marker=False)
    source, _ = make_source(tmp_path, settle=30.0, clock=lambda: now[0])
    for _ in range(3):
        await source.refresh()
    assert counting.calls == []  # no analyse.done and files younger than the quiet time

    age(path, 60)
    await source.refresh()
    kernels = write(path / OUT / "kernel_details.csv", "Step Id,Name,Type,Accelerator Core,Duration(us)\n1,a,A,AI_CORE,5\n")
    age(path, 60)
    os.utime(kernels, (now[0] - 60, now[0] - 59))  # still changing between scans
    await source.refresh()
    assert counting.calls == []
    await source.refresh()  # listing unchanged since the previous scan, quiet for 60 s > 30 s
    assert counting.calls == [path]


async def test_marker_present_but_files_still_changing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    path = torch_profile(tmp_path / "profiles" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)])
    source, _ = make_source(tmp_path)
    await source.refresh()
    with open(path / OUT / "step_trace_time.csv", "a") as f:
        f.write("2,9.0,0,0,0,1.0,10,0,0,0\r\n")
    await source.refresh()
    assert counting.calls == []
    await source.refresh()
    assert counting.calls == [path]
    assert source.latest_summaries()[0].steps == (1, 2)


async def test_profiler_info_missing_and_no_marker_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    path = torch_profile(tmp_path / "profiles" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)], marker=False)
    (path / "profiler_info_0.json").unlink()
    age(path, 3600)
    source, _ = make_source(tmp_path, settle=30.0)
    for _ in range(3):
        await source.refresh()
    assert counting.calls == []  # collection has not ended (no profiler_info*.json)


async def test_msprof_export_needs_quiet_time_only(tmp_path: Path) -> None:
    path = build(tmp_path / "profiles" / "tile" / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", MSPROF)
    age(path, 120)
    source, _ = make_source(tmp_path, settle=30.0)
    await source.refresh()
    await source.refresh()
    (summary,) = source.latest_summaries()
    assert (summary.producer, summary.job_name, summary.rank) == ("msprof", "tile", 0)


async def test_bad_files_count_once_by_reason(tmp_path: Path) -> None:
    path = build(tmp_path / "profiles" / "job" / "r0_ascend_pt", PT_LEVEL1)
    write(path / OUT / "kernel_details.csv", "Step Id,Name\n50,x\n")
    write(path / OUT / "trace_view.json", '[{"ph": "M"}, {"ph": ')
    write(path / OUT / "analyse.done", "")
    source, health = make_source(tmp_path)
    for _ in range(4):
        await source.refresh()
    assert dict(status(health).errors) == {"missing_columns": 1, "truncated": 1}
    assert status(health).success  # the latest run had nothing new to fail on
    (summary,) = source.latest_summaries()
    assert summary.compute_ratio is not None and summary.memcpy_ratio is not None


async def test_unusable_export_is_remembered_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    write(tmp_path / "profiles" / "r0_ascend_pt" / OUT / "analyse.done", "")
    source, health = make_source(tmp_path)
    for _ in range(4):
        await source.refresh()
    assert len(counting.calls) == 1
    assert dict(status(health).errors) == {"no_data": 1} and source.latest_summaries() == ()


async def test_parser_crash_costs_one_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch_profile(tmp_path / "profiles" / "r0_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)])

    def crash(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(source_module, "load_profile", crash)
    source, health = make_source(tmp_path)
    for _ in range(3):
        await source.refresh()
    assert dict(status(health).errors) == {"internal": 1}


async def test_missing_directory_and_no_profiles(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    source, health = make_source(tmp_path, roots=[tmp_path / "empty"])
    await source.refresh()
    assert status(health).success and source.latest_summaries() == ()  # no data is not an error
    source, health = make_source(tmp_path, roots=[tmp_path / "nowhere"])
    await source.refresh()
    assert not status(health).success and dict(status(health).errors) == {"missing_dir": 1}


async def test_reexport_is_parsed_again_and_deleted_export_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    path = torch_profile(tmp_path / "profiles" / "r0_ascend_pt", steps=[Step(1, 5.0, 0.0, 5.0)])
    source, _ = make_source(tmp_path)
    await source.refresh()
    await source.refresh()
    assert source.latest_summaries()[0].compute_ratio == 0.5
    torch_profile(path, steps=[Step(1, 9.0, 0.0, 1.0)])  # offline re-analysis rewrites the output
    await source.refresh()
    await source.refresh()
    assert source.latest_summaries()[0].compute_ratio == 0.9 and len(counting.calls) == 2
    import shutil

    shutil.rmtree(path)
    await source.refresh()
    assert source.latest_summaries() == ()
    assert json.loads((tmp_path / "state" / "profiles.json").read_text())["profiles"] == {}


async def test_latest_profile_per_job_and_rank_wins(tmp_path: Path) -> None:
    root = tmp_path / "profiles" / "bert"
    old = torch_profile(root / "a_ascend_pt", steps=[Step(1, 1.0, 0.0, 1.0)])
    new = torch_profile(root / "b_ascend_pt", steps=[Step(1, 3.0, 0.0, 1.0)])
    for path, end in ((old, 1_700_000_000), (new, 1_700_000_100)):
        info = {"rank_id": 0, "end_info": {"collectionTimeEnd": end * 10**9}}
        write(path / "profiler_info_0.json", json.dumps(info))
    source, _ = make_source(tmp_path)
    await source.refresh()
    await source.refresh()
    (summary,) = source.latest_summaries()
    assert summary.path == str(new) and summary.compute_ratio == 0.75 and summary.finished_at == 1_700_000_100


async def test_backlog_is_worked_off_a_few_per_run(tmp_path: Path) -> None:
    for n in range(5):
        torch_profile(tmp_path / "profiles" / f"job{n}" / "r_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)])
    source, _ = make_source(tmp_path, max_parses_per_run=2)
    await source.refresh()
    counts = []
    for _ in range(3):
        await source.refresh()
        counts.append(len(source.latest_summaries()))
    assert counts == [2, 4, 5]


async def test_corrupt_state_file_is_reported_and_replaced(tmp_path: Path) -> None:
    write(tmp_path / "state" / "profiles.json", "{not json")
    torch_profile(tmp_path / "profiles" / "r0_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)])
    source, health = make_source(tmp_path)
    await source.refresh()
    assert dict(status(health).errors) == {"state_file": 1}
    await source.refresh()
    assert json.loads((tmp_path / "state" / "profiles.json").read_text())["version"] == 1


async def test_task_tuple_for_the_sampler(tmp_path: Path) -> None:
    source, _ = make_source(tmp_path, interval=45.0)
    (task,) = source.tasks()
    assert (task.name, task.interval, task.run) == ("profiles", 45.0, source.refresh)


def test_find_profiles_depth_and_output_dirs(tmp_path: Path) -> None:
    deep = torch_profile(tmp_path / "a" / "b" / "c" / "d" / "x_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)])
    shallow = torch_profile(tmp_path / "a" / "y_ascend_pt", steps=[Step(1, 1.0, 0.0, 0.0)])
    refs, _ = find_profiles(tmp_path, max_depth=3)
    assert [r.path for r in refs] == [shallow]
    refs, _ = find_profiles(tmp_path, max_depth=5)
    assert {r.path for r in refs} == {deep, shallow} and {r.job_name for r in refs} == {"a"}
    (ref,), _ = find_profiles(shallow)  # the export itself as the root
    assert (ref.path, ref.job_name) == (shallow, "a")
    # a PROF_ dir inside a torch_npu export is part of that export, not a second profile
    write(shallow / "PROF_000001_x" / "mindstudio_profiler_output" / "op_summary_1.csv", "x")
    refs, _ = find_profiles(tmp_path / "a", max_depth=1)
    assert [r.path for r in refs] == [shallow]


async def test_an_export_too_old_to_be_held_is_skipped_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: exports too old to serve were parsed in full, then dropped. With max_exports
    held, an export older (by its files' mtimes) than all of them is never parsed: its files
    (here a 200 MB kernel table) are not opened; it is counted and logged as a max_exports drop
    once, and the exports held stay served."""
    counting = Counting(monkeypatch)
    new = torch_profile(tmp_path / "profiles" / "new" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)])
    old = torch_profile(tmp_path / "profiles" / "old" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)])
    with open(old / OUT / "kernel_details.csv", "wb") as handle:
        handle.write(b"Step Id,Name,Type,Accelerator Core,Duration(us)\n")
        handle.truncate(200 << 20)  # sparse: it would cost a parse, were it opened
    age(old, 2 * 86_400)
    age(new, 60)
    source, health = make_source(tmp_path, max_exports=1)
    for _ in range(4):
        await source.refresh()
    assert counting.calls == [new]
    assert [s.job_name for s in source.latest_summaries()] == ["new"]
    assert dict(source.part().dropped)["max_exports"] == 1  # counted once, not on every scan
    assert status(health).success
