"""Figure 3: RSS after 10,000 sample cycles vs after 1,000 (goal: within 5 %, no growth).

10,000 cycles through real subprocesses would take hours, so this drives the in-process
path (benchmarks/_inprocess.py): the real assembled exporter with its npu-smi runner
swapped for canned simulator text (a3, 16 dies, 64 processes, 10 time points in
rotation so values change every cycle). Each cycle runs refresh_overview,
refresh_details (every cycle, so 10,000 details rounds too), sampler.publish and a
registry render (prometheus_client.generate_latest). RSS is read with psutil after a
gc.collect() at each checkpoint; the baseline is the RSS after 1,000 cycles in the same run.

    python -m benchmarks.exporter_rss     (env BENCH_RSS_CYCLES, default 10000)
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from typing import Any

import psutil

from benchmarks import _common as c
from benchmarks import _inprocess

CYCLES = int(os.environ.get("BENCH_RSS_CYCLES", "10000"))
BASELINE_CYCLES = min(1000, CYCLES)


def _checkpoints(total: int) -> list[int]:
    points = {1, 100, 500, BASELINE_CYCLES, total}
    points.update(range(1000, total + 1, 1000))
    return sorted(p for p in points if 1 <= p <= total)


async def _drive() -> list[dict[str, Any]]:
    exporter, fake = _inprocess.build()
    proc = psutil.Process()
    wanted = set(_checkpoints(CYCLES))
    out = []
    cpu0, wall0 = time.process_time(), time.monotonic()
    for index in range(1, CYCLES + 1):
        body = await _inprocess.cycle(exporter, fake, index)
        if index in wanted:
            cpu, wall = time.process_time(), time.monotonic()
            gc.collect()
            out.append(
                {
                    "cycle": index,
                    "rss_bytes": proc.memory_info().rss,
                    "gc_objects": len(gc.get_objects()),
                    "exposition_bytes": len(body),
                    "exposition_samples": c.count_samples(body.decode()),
                    "cpu_seconds": cpu - cpu0,
                    "wall_seconds": wall - wall0,
                    "npu_smi_calls": fake.calls,
                }
            )
    return out


def run() -> dict[str, Any]:
    points = asyncio.run(_drive())
    by_cycle = {p["cycle"]: p for p in points}
    base, last = by_cycle[BASELINE_CYCLES], by_cycle[CYCLES]
    growth = c.ratio(last["rss_bytes"], base["rss_bytes"])
    cycles_after = CYCLES - BASELINE_CYCLES
    per_cycle_ms = 1000 * (last["cpu_seconds"] - base["cpu_seconds"]) / cycles_after if cycles_after else None
    samples = {p["exposition_samples"] for p in points}
    mib = 1 / (1024 * 1024)
    figures = [
        c.figure(
            f"RSS after {CYCLES:,} sample cycles",
            last["rss_bytes"] * mib,
            "MiB",
            baseline_name=f"RSS after {BASELINE_CYCLES:,} cycles",
            baseline=base["rss_bytes"] * mib,
            goal="ratio <= 1.05 (no growth)",
            meets_goal=growth is not None and growth <= 1.05,
        ),
        c.figure(
            f"Python objects after {CYCLES:,} cycles",
            float(last["gc_objects"]),
            "objects",
            baseline_name=f"after {BASELINE_CYCLES:,} cycles",
            baseline=float(base["gc_objects"]),
        ),
    ]
    notes = [
        f"{CYCLES:,} cycles of refresh_overview + refresh_details + publish + generate_latest, in one process, "
        f"{last['npu_smi_calls']:,} canned npu-smi answers (no subprocesses).",
        f"Exposition size per render: {sorted(samples)} samples (constant = no series leak).",
        f"In-process CPU per cycle (parse + publish + render, no spawns): {per_cycle_ms:.2f} ms "
        f"(measured between cycle {BASELINE_CYCLES:,} and {CYCLES:,}).",
        "RSS read after gc.collect() at each checkpoint; the runner gives every module its own process.",
    ]
    return {
        "title": f"RSS stability over {CYCLES:,} in-process sample cycles (16 chips, 64 processes)",
        "summary": f"Ratio = RSS after {CYCLES:,} cycles / RSS after {BASELINE_CYCLES:,} cycles, same process, same run.",
        "figures": c.rounded(figures),
        "raw": c.rounded({"checkpoints": points, "cpu_per_cycle_ms": per_cycle_ms}),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_rss",
    }


if __name__ == "__main__":
    c.main(run)
