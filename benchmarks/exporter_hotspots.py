"""Where the exporter's time goes: per-phase timings, cProfile hot spots, subprocess cost.

Informational (no goal): evidence for the figures of exporter_scrape / exporter_cpu.
- Phases of one in-process sample cycle + render (benchmarks/_inprocess.py: the real
  assembled exporter, npu-smi answered from canned a3 text, 16 dies, 64 processes),
  timed with perf_counter over PHASE_CYCLES cycles; the baseline of each ratio is the whole
  cycle in the same run, so a ratio is that phase's share.
- The scrape path's two encoders (text 0.0.4; OpenMetrics + gzip level 5, what a
  Prometheus scrape gets), same registry.
- cProfile over PROFILE_CYCLES cycles: the functions with the most own time, and own time
  grouped by package.
- The parent-side CPU of one npu-smi call through exporter.core.runner.CommandRunner
  (spawn, pipes, reaping; children's CPU excluded): /bin/true and the simulator's `info`.

    python -m benchmarks.exporter_hotspots
"""

from __future__ import annotations

import asyncio
import cProfile
import gzip
import os
import pstats
import resource
import shutil
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import (
    generate_latest as generate_openmetrics,
)

from benchmarks import _common as c
from benchmarks import _inprocess
from exporter.core.runner import CommandRunner

WARMUP_CYCLES = 50
PHASE_CYCLES = 1000
PROFILE_CYCLES = 300
SPAWNS = 100
SIM_SPAWNS = 20
TOP = 15


async def _phases() -> dict[str, list[float]]:
    exporter, fake = _inprocess.build()
    src = _inprocess.npu_smi(exporter)
    times: dict[str, list[float]] = defaultdict(list)
    for index in range(WARMUP_CYCLES + PHASE_CYCLES):
        fake.point = index
        t0 = time.perf_counter()
        await src.refresh_overview()
        t1 = time.perf_counter()
        await src.refresh_details()
        t2 = time.perf_counter()
        exporter.sampler.publish()
        t3 = time.perf_counter()
        generate_latest(exporter.registry)
        t4 = time.perf_counter()
        om = generate_openmetrics(exporter.registry)
        t5 = time.perf_counter()
        gzip.compress(om, compresslevel=5)
        t6 = time.perf_counter()
        if index >= WARMUP_CYCLES:
            for name, seconds in (
                ("overview", t1 - t0),
                ("details", t2 - t1),
                ("publish", t3 - t2),
                ("render_text", t4 - t3),
                ("render_openmetrics", t5 - t4),
                ("gzip_openmetrics", t6 - t5),
            ):
                times[name].append(seconds * 1000)
            times["cycle"].append((t4 - t0) * 1000)
    return times


def _where(filename: str) -> str:
    """A short location: package-relative for site-packages, the repo and the stdlib."""
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1]
    if filename.startswith(str(c.REPO) + os.sep):
        return os.path.relpath(filename, c.REPO)
    if "/lib/python3" in filename:
        return filename.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return filename


def _area(filename: str) -> str:
    where = _where(filename)
    if where.startswith("exporter/"):
        return "/".join(where.split("/")[:2]).removesuffix(".py")
    if where.startswith("prometheus_client/"):
        return "prometheus_client"
    if "asyncio" in filename:
        return "asyncio"
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (str, re, len, ...)"
    return "other stdlib"


async def _profiled() -> pstats.Stats:
    exporter, fake = _inprocess.build()
    for index in range(WARMUP_CYCLES):
        await _inprocess.cycle(exporter, fake, index)
    profile = cProfile.Profile()
    profile.enable()
    for index in range(PROFILE_CYCLES):
        await _inprocess.cycle(exporter, fake, index)
    profile.disable()
    return pstats.Stats(profile)


def _profile_tables(stats: pstats.Stats) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    rows, areas = [], defaultdict(float)
    total = 0.0
    for (filename, line, func), (_cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += tt
        areas[_area(filename)] += tt
        rows.append((tt, ct, nc, f"{_where(filename)}:{line}({func})" if line else func))
    rows.sort(reverse=True)
    top = [
        {
            "function": name,
            "calls_per_cycle": nc / PROFILE_CYCLES,
            "own_ms_per_cycle": 1000 * tt / PROFILE_CYCLES,
            "cumulative_ms_per_cycle": 1000 * ct / PROFILE_CYCLES,
            "own_share": tt / total,
        }
        for tt, ct, nc, name in rows[:TOP]
    ]
    by_area = [
        {"area": area, "own_ms_per_cycle": 1000 * tt / PROFILE_CYCLES, "own_share": tt / total}
        for area, tt in sorted(areas.items(), key=lambda kv: -kv[1])
    ]
    return top, by_area, 1000 * total / PROFILE_CYCLES


async def _spawn_cost(argv: list[str], count: int) -> dict[str, float]:
    runner = CommandRunner(timeout=30)
    await runner.run(argv)  # warm-up
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(count):
        result = await runner.run(argv)
        if result.returncode != 0:
            raise c.BenchError(f"{argv} exited with {result.returncode}")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (children1.ru_utime - children0.ru_utime) + (children1.ru_stime - children0.ru_stime)
    return {
        "calls": count,
        "parent_cpu_ms_per_call": 1000 * cpu / count,
        "wall_ms_per_call": 1000 * wall / count,
        "child_cpu_ms_per_call": 1000 * child_cpu / count,
    }


def run() -> dict[str, Any]:
    phases = asyncio.run(_phases())
    summary = {
        name: {"mean_ms": statistics.fmean(v), "p50_ms": c.percentile(v, 50), "p99_ms": c.percentile(v, 99)} for name, v in phases.items()
    }
    cycle = summary["cycle"]["mean_ms"]
    top, by_area, profiled_ms = _profile_tables(asyncio.run(_profiled()))
    true = shutil.which("true") or "/bin/true"
    spawn_true = asyncio.run(_spawn_cost([true], SPAWNS))
    sim_argv = [sys.executable, "-m", "exporter.simulator", "--model", "a3", "--scenario", "healthy", "--processes", "4", "--", "info"]
    spawn_sim = asyncio.run(_spawn_cost(sim_argv, SIM_SPAWNS))

    labels = {
        "overview": "refresh_overview (parse `npu-smi info`)",
        "details": "refresh_details (parse 24 `-t` answers)",
        "publish": "sampler.publish (build the snapshot)",
        "render_text": "registry render, text 0.0.4 (plain scrape)",
    }
    figures = [
        c.figure(text, summary[key]["mean_ms"], "ms", baseline_name="whole in-process cycle (mean)", baseline=cycle)
        for key, text in labels.items()
    ]
    scrape_om = summary["render_openmetrics"]["mean_ms"] + summary["gzip_openmetrics"]["mean_ms"]
    figures.append(
        c.figure(
            "OpenMetrics render + gzip (Prometheus scrape)",
            scrape_om,
            "ms",
            baseline_name="text 0.0.4 render",
            baseline=summary["render_text"]["mean_ms"],
        )
    )
    figures.append(
        c.figure(
            "parent CPU per npu-smi call (CommandRunner, simulator `info`)",
            spawn_sim["parent_cpu_ms_per_call"],
            "ms",
            baseline_name="parent CPU per CommandRunner call of /bin/true",
            baseline=spawn_true["parent_cpu_ms_per_call"],
        )
    )
    area_text = ", ".join(f"{a['area']} {100 * a['own_share']:.0f} %" for a in by_area[:5])
    notes = [
        f"Phases: mean over {PHASE_CYCLES} cycles after {WARMUP_CYCLES} warm-up; 'cycle' = overview + details + publish + text render.",
        f"cProfile over {PROFILE_CYCLES} cycles ({profiled_ms:.1f} ms/cycle under the profiler): own time by area: {area_text}.",
        f"CommandRunner: {SPAWNS} calls of {true}, {SIM_SPAWNS} of the simulator's `info`; parent CPU includes "
        "asyncio's child-watcher threads; the children's own CPU is shown apart (child_cpu_ms_per_call).",
    ]
    return {
        "title": "Exporter hot spots: phase timings, cProfile, subprocess cost",
        "summary": "Informational. Ratios are shares of the whole in-process cycle measured in the same run.",
        "figures": c.rounded(figures),
        "tables": {
            f"Top {TOP} functions by own time (cProfile, per cycle)": c.rounded(top, 3),
            "Own time by area (cProfile, per cycle)": c.rounded(by_area, 3),
        },
        "raw": c.rounded(
            {"phases": summary, "spawn_true": spawn_true, "spawn_simulator_info": spawn_sim, "profiled_ms_per_cycle": profiled_ms}
        ),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_hotspots",
    }


if __name__ == "__main__":
    c.main(run)
