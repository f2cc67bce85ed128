"""Hook overhead per training step: one ``mon.step()`` with two ``mon.phase()`` vs the bare loop.

Both loops run the same small Python body (two calls of a few hundred nanoseconds, the
"h2d" and "compute" stand-ins) in the same process and run, in alternating blocks of
BLOCK steps (which goes first flips every round) so both see the same machine noise.
Per-step time = block time / BLOCK; the added time is hooked minus bare per round. The
Monitor sends to a real exporter process on 127.0.0.1 (its sender thread does its real
work during the hooked blocks), with a buffer large enough that nothing is dropped.

- median added microseconds per step: the hot path (goal <= 2 us);
- mean added microseconds per step: also the sender thread's share of the GIL, which in
  a real loop mostly overlaps with device work and framework code that releases the GIL;
- what ``step(index=i)`` (the training step, for goodput's lost progress; issue 42) adds
  over the same hooked step without it: a third loop in the same rounds, the three in a
  rotating order (goal <= 0.3 us at the median).

    python -m benchmarks.hooks_overhead     (env BENCH_HOOK_ROUNDS, BENCH_HOOK_BLOCK)
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from benchmarks import _common as c

ROUNDS = int(os.environ.get("BENCH_HOOK_ROUNDS", "300"))
BLOCK = int(os.environ.get("BENCH_HOOK_BLOCK", "500"))
GOAL_US = 2.0
GOAL_INDEX_US = 0.3


def _work(x: float) -> float:
    for _ in range(8):
        x = x * 1.000001 + 1e-9
    return x


def _bare(n: int) -> float:
    x = 1.0
    start = time.perf_counter_ns()
    for _ in range(n):
        x = _work(x)
        x = _work(x)
    return (time.perf_counter_ns() - start) / n


def _hooked(mon: Any, n: int) -> float:
    x = 1.0
    step, phase = mon.step, mon.phase
    start = time.perf_counter_ns()
    for _ in range(n):
        with step(samples=32):
            with phase("h2d"):
                x = _work(x)
            with phase("compute"):
                x = _work(x)
    return (time.perf_counter_ns() - start) / n


def _hooked_index(mon: Any, n: int, first: int) -> float:
    """_hooked with each step's training-step index (``first``, ``first + 1``, ...)."""
    x = 1.0
    step, phase = mon.step, mon.phase
    start = time.perf_counter_ns()
    for i in range(first, first + n):
        with step(samples=32, index=i):
            with phase("h2d"):
                x = _work(x)
            with phase("compute"):
                x = _work(x)
    return (time.perf_counter_ns() - start) / n


def measure(url: str, rounds: int = ROUNDS, block: int = BLOCK) -> dict[str, Any]:
    from exporter.hooks import Monitor

    # MFU declared: its cost counts. Room for every step of both hooked loops.
    mon = Monitor("bench-overhead", url=url, buffer_size=2 * (rounds + 1) * block + 1000, flops_per_step=1e12)
    _bare(block), _hooked(mon, block), _hooked_index(mon, block, 0)  # warm-up (and the sender thread's start)
    bare: list[float] = []
    hooked: list[float] = []
    indexed: list[float] = []
    loops = (
        lambda r: bare.append(_bare(block)),
        lambda r: hooked.append(_hooked(mon, block)),
        lambda r: indexed.append(_hooked_index(mon, block, (r + 1) * block)),
    )
    for index in range(rounds):
        shift = index % 3  # each loop goes first, second and third in turn
        for loop in loops[shift:] + loops[:shift]:
            loop(index)
    mon.close(timeout=30)
    added = [(h - b) / 1000 for h, b in zip(hooked, bare, strict=True)]
    index_added = [(i - h) / 1000 for i, h in zip(indexed, hooked, strict=True)]
    return {
        "rounds": rounds,
        "block_steps": block,
        "bare_step_us_median": statistics.median(bare) / 1000,
        "bare_step_us_mean": statistics.fmean(bare) / 1000,
        "hooked_step_us_median": statistics.median(hooked) / 1000,
        "added_us_median": statistics.median(added),
        "added_us_mean": statistics.fmean(added),
        "added_us_p90": c.percentile(added, 90),
        "ratio_median": statistics.median(hooked) / statistics.median(bare),
        "indexed_step_us_median": statistics.median(indexed) / 1000,
        "index_added_us_median": statistics.median(index_added),
        "index_added_us_mean": statistics.fmean(index_added),
        "client": mon.stats(),
    }


def run() -> dict[str, Any]:
    with c.ingest_exporter() as (_, client):
        raw = measure(f"http://{c.HOST}:{client.port}")
    if raw["client"]["dropped"]:
        raise c.BenchError(f"the client dropped {raw['client']['dropped']} steps; the measurement is not representative")
    return {
        "title": "Training-hook overhead per step (one step() with two phase()s vs the bare loop)",
        "summary": (
            f"{raw['added_us_median']:.2f} us added per step at the median "
            f"({raw['bare_step_us_median']:.2f} us bare, {raw['hooked_step_us_median']:.2f} us hooked); "
            f"{raw['added_us_mean']:.2f} us on average including the sender thread; "
            f"index= adds {raw['index_added_us_median']:.2f} us at the median."
        ),
        "figures": [
            c.figure(
                "added time per step, median",
                raw["added_us_median"],
                "us",
                baseline_name="bare step, median",
                baseline=raw["bare_step_us_median"],
                ratio_value=raw["ratio_median"],
                goal=f"<= {GOAL_US:g} us",
                meets_goal=raw["added_us_median"] <= GOAL_US,
            ),
            c.figure(
                "added time per step, mean (incl. sender thread)",
                raw["added_us_mean"],
                "us",
                baseline_name="bare step, mean",
                baseline=raw["bare_step_us_mean"],
            ),
            c.figure(
                "added by step(index=), median",
                raw["index_added_us_median"],
                "us",
                baseline_name="hooked step without index, median",
                baseline=raw["hooked_step_us_median"],
                goal=f"<= {GOAL_INDEX_US:g} us",
                meets_goal=raw["index_added_us_median"] <= GOAL_INDEX_US,
            ),
        ],
        "raw": c.rounded(raw),
        "notes": [
            f"{raw['rounds']} rounds of {raw['block_steps']} steps per loop (bare, hooked, hooked with index=), "
            "in a rotating order; per-step time = block time / steps; ratio = hooked / bare per-step median; "
            "index= added = hooked with index minus hooked without, per round.",
            "The Monitor posts to a real exporter on 127.0.0.1; every step was delivered (client stats in raw).",
            "A real step takes milliseconds; the added time is what matters, not the ratio.",
        ],
        "command": "python -m benchmarks.hooks_overhead",
    }


if __name__ == "__main__":
    c.main(run)
