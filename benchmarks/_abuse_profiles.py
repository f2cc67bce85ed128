"""Issue 45 numbers 1 and 5 for the abuse benchmark (benchmarks/exporter_abuse.py).

1. Profile memory: an exporter watching a directory gets three exports whose kernel_details.csv
   and op_statistic.csv hold BENCH_ABUSE_NAME_ROWS (60,000) rows of 1,000-character operator
   types; its RSS before (baseline), its peak (VmHWM) and its RSS once they are refused and the
   rest served. Before the byte budget: 50 -> 365 MiB after three, never given back. Goals: peak
   < 200 MiB, after within 20 MiB of the baseline.
5. Parse time: a communication.json of one step with BENCH_ABUSE_OPS (5,000,000) empty ops read
   by the exporter's reader with the default budgets (85 s of a core before them). Goal: refused
   or parsed in under 10 s (CPU seconds).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks import _common as c
from benchmarks.profile_budget import comm_ops
from exporter.profiles.formats.budget import Budget
from exporter.profiles.formats.common import Limits, ProfileParseError
from exporter.profiles.formats.info import read_communication, read_json_file
from tests.support.profile_exports import PT_LEVEL1, build

ROWS = int(os.environ.get("BENCH_ABUSE_NAME_ROWS", "60000"))
EXPORTS = 3
OUT = "ASCEND_PROFILER_OUTPUT"
MIB = 1 << 20


def _memory(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) << 10, int(fields["VmHWM"].split()[0]) << 10


def _long_name_exports(staging: Path) -> list[str]:
    files = staging / "files"
    files.mkdir(parents=True)
    kernels, ops = files / "kernel_details.csv", files / "op_statistic.csv"
    with open(kernels, "w", encoding="utf-8") as k, open(ops, "w", encoding="utf-8") as o:
        k.write("Step Id,Name,Type,Accelerator Core,Duration(us)\n")
        o.write("OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n")
        for i in range(ROWS):
            name = f"{i:06d}" + "T" * 994
            k.write(f"1,{name},{name},AI_CORE,1.0\n")
            o.write(f"{name},AI_CORE,1,1.0,1.0,1.0,1.0,1.0\n")
    jobs = []
    for n in range(EXPORTS):
        export = build(staging / f"job{n}" / f"host_{n}_ascend_pt", PT_LEVEL1)
        for table in (kernels, ops):
            (export / OUT / table.name).unlink()
            os.link(table, export / OUT / table.name)
        jobs.append(f"job{n}")
    return jobs


def profile_memory(tmp: Path) -> dict[str, Any]:
    watched, staging = tmp / "watched", tmp / "staging"
    watched.mkdir()
    jobs = _long_name_exports(staging)
    port = c.free_port()
    extra = ("--profile-dir", str(watched), "--profiles.interval", "1s", "--profiles.settle", "1s")
    with c.started("cann-exporter", [*c.exporter_argv(port, *extra), "--npu-smi.details="], c.exporter_env()) as proc:
        client = c.Client(port)
        try:
            c.wait_until("/healthz", lambda: client.get("/healthz")[0] == 200, 60, procs=[proc])
            time.sleep(3)  # the first scans and samples
            baseline, _ = _memory(proc.pid)
            for job in jobs:
                os.rename(staging / job, watched / job)

            def settled() -> bool:
                text = client.text("/metrics")
                served = {labels.get("job_name") for labels, _ in c.samples(text, "npu_profile_compute_ratio")}
                refused = c.sample_value(text, "cann_exporter_source_errors_total", source="profiles", reason="memory_budget") or 0
                return served >= set(jobs) and refused >= 2 * EXPORTS

            took = c.wait_until("the three exports", settled, 300, every=0.5, procs=[proc])
            time.sleep(2)
            after, peak = _memory(proc.pid)
        finally:
            client.close()
    return {"baseline_mib": baseline / MIB, "peak_mib": peak / MIB, "after_mib": after / MIB, "seconds": took, "rows": ROWS}


def parse_time(tmp: Path) -> dict[str, Any]:
    path = tmp / "communication.json"
    comm_ops(path)
    budget = Budget.of(Limits())
    start = time.process_time()
    try:
        read_json_file(path, read_communication, Limits(), budget=budget)
        outcome = "parsed"
    except ProfileParseError as exc:
        outcome = exc.reason
    seconds = time.process_time() - start
    return {"bytes": path.stat().st_size, "cpu_seconds": seconds, "outcome": outcome, "work_units": budget.worked}


def run(tmp: Path, notes: list[str]) -> dict[str, Any]:
    figures: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    for name, part in (("profile_memory", profile_memory), ("parse_time", parse_time)):
        sub = tmp / name
        sub.mkdir()
        try:
            raw[name] = part(sub)
        except (c.BenchError, OSError) as exc:
            notes.append(f"Issue 45 part {name} not measured: {exc}")
    if "profile_memory" in raw:
        m = raw["profile_memory"]
        figures += [
            c.figure(
                f"exporter peak RSS over three exports of {m['rows']:,} 1,000-character names",
                round(m["peak_mib"], 1),
                "MiB",
                baseline_name="RSS before them",
                baseline=round(m["baseline_mib"], 1),
                goal="< 200 MiB (was 365)",
                meets_goal=m["peak_mib"] < 200,
            ),
            c.figure(
                "exporter RSS once they are refused and the rest served",
                round(m["after_mib"], 1),
                "MiB",
                baseline_name="RSS before them",
                baseline=round(m["baseline_mib"], 1),
                goal="within 20 MiB of the baseline",
                meets_goal=m["after_mib"] - m["baseline_mib"] < 20,
            ),
        ]
    if "parse_time" in raw:
        p = raw["parse_time"]
        figures.append(
            c.figure(
                f"CPU seconds of a {p['bytes'] / 1e6:.0f} MB communication.json of one step of tiny ops ({p['outcome']})",
                round(p["cpu_seconds"], 2),
                "s",
                baseline_name="before the budgets (issue 45)",
                baseline=85.0,
                goal="< 10 s",
                meets_goal=p["cpu_seconds"] < 10,
            )
        )
    return {"figures": figures, "raw": raw}
