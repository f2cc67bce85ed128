"""What one scan of a watched directory may read and what the profile source remembers, on real
directories: a scan examines at most profiles.max_entries directory entries (breadth first,
subdirectories by name, a directory used only when listed whole) and counts too_many_entries
once per scan; an export listing more than MAX_EXPORT_ENTRIES costs itself only; at most
4 x profiles.max_exports exports are remembered however many are created, and the forgotten
are not parsed again, across restarts too."""

from __future__ import annotations

import json
import logging
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from exporter.profiles.layout import (
    MAX_ENTRIES,
    MAX_EXPORT_ENTRIES,
    EntryBudget,
    find_profiles,
)
from exporter.profiles.state import State, parse_state, render_state
from tests.support.profile_builders import Step, torch_profile
from tests.support.profile_exports import PT_LEVEL1, build
from tests.support.profile_source import errors, failing, jobs, scanned, source_for

OUT = "ASCEND_PROFILER_OUTPUT"


def flood(directory: Path, count: int) -> None:
    """``count`` empty subdirectories, as a job creating directories without end would leave."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"d{i:05d}").mkdir()


def parsed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.profile for r in caplog.records if r.getMessage() == "profile parsed"]


async def test_twenty_thousand_empty_directories(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    watched = tmp_path / "watched"
    flood(watched, 20_000)
    build(watched / "host_1_ascend_pt", PT_LEVEL1)  # a finished export among them

    # The scan stops at the bound: exactly that many entries read, the directory not used.
    budget = EntryBudget(5_000)
    tracemalloc.start()
    try:
        refs, failures = find_profiles(watched, budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (budget.used, budget.stopped_in) == (5_000, str(watched))
    assert refs == [] and [f.reason for f in failures] == ["too_many_entries"]
    assert peak < 4 * 2**20  # what 5,000 entries hold, not 20,000

    # The source counts it once per scan and logs it once while it lasts; it serves nothing new.
    source, health = source_for(tmp_path, max_entries=5_000)
    with caplog.at_level(logging.WARNING, logger="exporter.sources"):
        await scanned(source, 3)
    assert errors(health) == {"too_many_entries": 3}
    assert failing(health) == {str(watched): "too_many_entries"}
    logged = [r for r in caplog.records if getattr(r, "reason", None) == "too_many_entries"]
    assert len(logged) == 1 and "profiles.max_entries" in logged[0].error
    assert jobs(source) == set()

    # Within the default bound the directory is listed whole and the export among them is served.
    assert 20_000 + 20 < MAX_ENTRIES
    source, health = source_for(tmp_path)
    await scanned(source)
    assert errors(health) == {} and jobs(source) == {"watched"}


async def test_the_scan_order_is_breadth_first_and_by_name(tmp_path: Path) -> None:
    """An export near the root is found before any deeper directory is listed; the directory
    where the budget runs out, and everything after it in that order, is not used."""
    watched = tmp_path / "watched"
    flood(watched / "a_flood", 2_000)  # listed first among the level-1 directories
    build(watched / "host_1_ascend_pt", PT_LEVEL1)  # level 1: found when `watched` is listed
    build(watched / "b_job" / "host_2_ascend_pt", PT_LEVEL1)  # level 2: listed after a_flood

    for _ in range(2):  # the same whatever the file system's order
        refs, failures = find_profiles(watched, budget=EntryBudget(1_000))
        assert [r.job_name for r in refs] == ["watched"]
        assert [(f.reason, str(watched / "a_flood") in f.message) for f in failures] == [("too_many_entries", True)]

    source, health = source_for(tmp_path, max_entries=1_000)
    await scanned(source)
    assert jobs(source) == {"watched"} and errors(health) == {"too_many_entries": 2}

    roomy, health = source_for(tmp_path, max_entries=2_100)  # a_flood fits: b_job is reached
    await scanned(roomy)
    assert jobs(roomy) == {"watched", "b_job"} and errors(health) == {}


async def test_an_export_listing_too_many_entries_costs_itself_only(tmp_path: Path) -> None:
    build(tmp_path / "watched" / "good" / "host_1_ascend_pt", PT_LEVEL1)
    big = build(tmp_path / "watched" / "big" / "host_1_ascend_pt", PT_LEVEL1)
    for i in range(MAX_EXPORT_ENTRIES):
        (big / OUT / f"extra_{i:04d}.csv").touch()
    source, health = source_for(tmp_path)
    await scanned(source)
    assert jobs(source) == {"good"}
    assert failing(health) == {str(big): "too_many_entries"} and errors(health) == {"too_many_entries": 2}


def export_of(tmp_path: Path, generation: int, kind: str, produced: float) -> Path:
    """A finished export (analyse.done) produced at ``produced``: with data, or empty (no_data)."""
    export = tmp_path / "watched" / f"job{generation % 3}" / f"g{generation:02d}_{kind}_ascend_pt"
    if kind == "ok":
        torch_profile(export, steps=[Step(1, 9.0, 0.0, 1.0)])
        (export / "profiler_info_0.json").unlink()  # the same end time in every one: mtimes decide
    else:
        (export / OUT).mkdir(parents=True)
        (export / OUT / "analyse.done").touch()
    for path in [export, *export.rglob("*")]:
        os.utime(path, (produced, produced))
    return export


async def test_what_the_source_remembers_stays_under_its_cap(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """25 generations of two exports (one with data, one failing no_data), none deleted, with
    max_exports 2: at most 8 remembered; each export parsed once; the state file as small."""
    state_file = tmp_path / "state.json"
    options = {"max_exports": 2, "state_file": str(state_file)}
    source, health = source_for(tmp_path, **options)
    start = time.time() - 10_000
    newest: list[str] = []
    with caplog.at_level(logging.INFO, logger="exporter.profiles"):
        for generation in range(25):
            newest.insert(0, str(export_of(tmp_path, generation, "ok", start + 10 * generation)))
            export_of(tmp_path, generation, "empty", start + 10 * generation + 5)
            await scanned(source)
            assert max(source.remembered()) <= 8
        assert len(parsed(caplog)) == len(set(parsed(caplog))) == 25  # every export with data, once
        assert errors(health)["no_data"] == 25
        assert dict(source.part().dropped) == {"max_exports": 23, "max_jobs": 0}
        assert {s.path for s in source.latest_summaries()} == set(newest[:2])
        assert len(json.loads(state_file.read_text())["profiles"]) <= 8

        caplog.clear()
        await scanned(source, 3)  # the forgotten, still on disk, stay forgotten
        restarted, _ = source_for(tmp_path, **options)
        await scanned(restarted, 3)  # so after a restart
    assert parsed(caplog) == []
    assert {s.path for s in restarted.latest_summaries()} == set(newest[:2])
    assert max(restarted.remembered()) <= 8


async def test_exports_waiting_to_settle_are_remembered_up_to_the_cap(tmp_path: Path) -> None:
    """Twenty exports still being written (no marker, touched just now): the newest 4 (max_exports 1)
    keep a fingerprint for the next scan; once they settle the newest is served."""
    for i in range(20):
        torch_profile(tmp_path / "watched" / f"job{i:02d}" / "r0_ascend_pt", steps=[Step(1, 9.0, 0.0, 1.0)], marker=False)
    source, _ = source_for(tmp_path, settle=3600.0, max_exports=1)
    await scanned(source)
    assert source.remembered() == (0, 4) and jobs(source) == set()

    past = time.time() - 7200
    for i, export in enumerate(sorted((tmp_path / "watched").glob("*/r0_ascend_pt"))):
        for path in [export, *export.rglob("*")]:
            os.utime(path, (past + i, past + i))  # job19 produced last
    await scanned(source, 4)
    assert jobs(source) == {"job19"} and max(source.remembered()) <= 4


def test_the_state_file_keeps_what_forgetting_needs() -> None:
    state = parse_state(render_state(State({}, forgotten_before=1234.5)))
    assert state.forgotten_before == 1234.5
    for bad in ('"soon"', "1e999", "1" + "0" * 400, "true"):  # not a finite number: the oldest
        text = f'{{"version": 1, "profiles": {{"/p": {{"fingerprint": "f", "newest_mtime": {bad}}}}}, "forgotten_before": {bad}}}'
        parsed_state = parse_state(text)
        assert (parsed_state.forgotten_before, parsed_state.entries["/p"].newest_mtime) == (0.0, 0.0)
    old = parse_state('{"version": 1, "profiles": {"/p": {"fingerprint": "f"}}}')  # written before either was kept
    assert (old.forgotten_before, old.entries["/p"].newest_mtime) == (0.0, 0.0)
