"""Soak test (opt-in: `make soak`; not part of `make bench`): does the exporter stay flat?

One real exporter on 127.0.0.1 with 16 simulated chips (Atlas A3) read every second, 8
training jobs pushing steps through exporter.hooks, a Prometheus-like scrape every second,
and npu-smi faults injected periodically through CANN_SIM_FAULT_FILE (hang, dcmi errors,
garbage, truncation, a chip gone, slowness). The exporter's RSS, open fds, threads and child
processes are sampled over time; a linear regression over the second half (after warm-up)
must show no growth. Results go to benchmarks/SOAK.md.

    SOAK_SECONDS=120 .venv/bin/python -m benchmarks.soak     (default 1200 s)

Everything is bounded: the run lasts SOAK_SECONDS (+ start-up and a short drain), each wait
has a deadline, and every process and thread started is stopped on the way out.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from benchmarks import _common as c
from benchmarks.__main__ import machine

SECONDS = float(os.environ.get("SOAK_SECONDS", "1200"))
OUT = Path(__file__).resolve().parent / "SOAK.md"
JOBS = 8
SCRAPE_EVERY = 1.0
# One fault per period, active for its first third; the rest of the period recovers.
FAULTS = ("info:hang", "error-8005", "info:garbage", "info:truncate", "gone=3", "info:slow=1.5", "error-8020", "usages:hang")
EXPORTER_FLAGS = (
    "--npu-smi.interval",
    "1s",
    "--npu-smi.timeout",
    "2s",
    "--npu-smi.detail-interval",
    "10s",
    "--max-age",
    "30s",
    "--log.level",
    "warning",
)
# Allowed drift over the second half, extrapolated from the fitted slope (noise is not growth).
LIMITS = {
    "rss_mib": ("max(2 MiB, 2 % of the mean)", lambda mean: max(2.0, 0.02 * mean)),
    "fds": ("2 fds", lambda mean: 2.0),
    "threads": ("1 thread", lambda mean: 1.0),
    "children": ("1 process", lambda mean: 1.0),
}


@dataclass(frozen=True)
class Sample:
    t: float
    rss_mib: float
    fds: int
    threads: int
    children: int
    settled: bool = False  # taken at the end of a fault period's recovery: what the slope test uses


@dataclass
class Stats:
    scrapes: int = 0
    scrape_failures: int = 0
    latencies: list[float] = field(default_factory=list)
    faults: list[tuple[float, str]] = field(default_factory=list)


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of value over time (per second); 0 for fewer than 3 points."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mt) * (v - mv) for t, v in points) / var


def _live_children(proc: psutil.Process) -> int:
    count = 0
    for child in proc.children(recursive=True):
        try:
            count += child.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
    return count


def take_sample(proc: psutil.Process, t0: float, settled: bool = False, budget: float = 0.5) -> Sample:
    """fds, threads and children at a moment no npu-smi call is in flight (each call holds
    pipes, a child and asyncio's child-watcher thread): readings every 50 ms for up to
    ``budget`` seconds, keeping the one with the fewest children. A leaked child never
    reaches zero, so it still shows."""
    end = time.monotonic() + budget
    best: tuple[int, int, int] | None = None
    while True:
        reading = (_live_children(proc), proc.num_fds(), proc.num_threads())
        best = reading if best is None else min(best, reading)
        if best[0] == 0 or time.monotonic() >= end:
            break
        time.sleep(0.05)
    children, fds, threads = best
    # Settled: asked for after a fault's recovery, and a moment with no call in flight was found.
    return Sample(time.monotonic() - t0, proc.memory_info().rss / 2**20, fds, threads, children, settled and children == 0)


def job_loop(index: int, url: str, stop: threading.Event, out: dict[str, Any]) -> None:
    """One training job: steps of ~50 ms with phases, reported through the hooks."""
    from exporter.hooks import Monitor

    mon = Monitor(f"soak-job-{index}", url=url, rank=0, world_size=1, device=index, framework="soak", flush_interval=0.5)
    steps = 0
    while not stop.is_set():
        with mon.step(samples=32):
            with mon.phase("data"):
                time.sleep(0.005)
            with mon.phase("compute"):
                time.sleep(0.04)
        steps += 1
    mon.close()
    out[index] = {"steps": steps, **mon.stats()}


def scrape_loop(client: c.Client, stop: threading.Event, stats: Stats) -> None:
    while not stop.wait(SCRAPE_EVERY):
        try:
            status, _, _, seconds = client.get("/metrics", c.PROMETHEUS_HEADERS)
        except OSError:
            stats.scrape_failures += 1
            continue
        stats.scrapes += 1
        stats.latencies.append(seconds)
        if status != 200:
            stats.scrape_failures += 1


def fault_schedule(seconds: float) -> float:
    """Period of the fault cycle: each fault at least twice when there is time, 9..30 s.
    A fault is on for the first third; hung calls are killed within the npu-smi timeout (2 s)."""
    return max(9.0, min(30.0, seconds / (2 * len(FAULTS))))


def drive(proc: c.Process, client: c.Client, fault_file: Path, seconds: float) -> tuple[list[Sample], Stats]:
    """Run the soak for ``seconds``: faults on schedule, a resource sample every few seconds."""
    stats, samples = Stats(), []
    exporter = psutil.Process(proc.pid)
    period, every = fault_schedule(seconds), max(2.0, seconds / 300)
    t0 = time.monotonic()
    next_sample, current, settled_in = t0, "", -1
    while (now := time.monotonic()) - t0 < seconds:
        proc.check_alive()
        elapsed = now - t0
        cycle, phase = int(elapsed // period), elapsed % period
        want = FAULTS[cycle % len(FAULTS)] if phase < period / 3 else ""
        if want != current:
            fault_file.write_text(want)
            stats.faults.append((elapsed, want or "(none)"))
            current = want
        if phase >= 0.6 * period and settled_in != cycle:  # recovered, before the next fault
            budget = min(5.0, period - phase - 0.3)
            samples.append(take_sample(exporter, t0, settled=True, budget=budget))
            settled_in = cycle
        elif now >= next_sample:
            samples.append(take_sample(exporter, t0))
            next_sample += every
        time.sleep(0.2)
    fault_file.write_text("")
    return samples, stats


def verdicts(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    """Slope of each resource over the settled samples of the second half (after warm-up).
    Mid-fault samples swing with the calls in flight; settled ones show what is left behind."""
    t_half = samples[-1].t / 2 if samples else 0.0
    half = [s for s in samples if s.settled and s.t >= t_half]
    window = (half[-1].t - half[0].t) if len(half) > 1 else 0.0
    out = {}
    for name, (rule, limit) in LIMITS.items():
        points = [(s.t, float(getattr(s, name))) for s in half]
        mean = sum(v for _, v in points) / max(1, len(points))
        per_second = slope(points)
        drift = per_second * window
        # Too few quiet moments is a failure too: a leaked child would never let one happen.
        out[name] = {
            "slope_per_hour": per_second * 3600,
            "drift_over_second_half": drift,
            "mean": mean,
            "limit": rule,
            "points": len(points),
            "flat": len(points) >= 3 and drift < limit(mean),
        }
    return out


def run_soak(seconds: float = SECONDS) -> dict[str, Any]:
    port = c.free_port()
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    fault_file = tmp / "faults"
    env = {**c.exporter_env(), "CANN_SIM_FAULT_FILE": str(fault_file)}
    argv = c.exporter_argv(port, *EXPORTER_FLAGS)
    started = dt.datetime.now(dt.timezone.utc)
    stop, jobs_out = threading.Event(), {}
    with c.started("exporter", argv, env) as proc:
        client = c.Client(port)
        timings = c.wait_exporter_complete(proc, client)
        threads = [threading.Thread(target=job_loop, args=(i, f"http://{c.HOST}:{port}", stop, jobs_out), daemon=True) for i in range(JOBS)]
        stats_holder = Stats()
        scraper = threading.Thread(target=scrape_loop, args=(c.Client(port), stop, stats_holder), daemon=True)
        for thread in (*threads, scraper):
            thread.start()
        try:
            samples, stats = drive(proc, client, fault_file, seconds)
        finally:
            stop.set()
            for thread in (*threads, scraper):
                thread.join(timeout=15)
        stats.scrapes, stats.scrape_failures, stats.latencies = (stats_holder.scrapes, stats_holder.scrape_failures, stats_holder.latencies)
        # Faults cleared: the exporter must come back to every chip on its own.
        recovered = c.wait_until("recovery after the last fault", lambda: _all_up(client), 60, procs=[proc])
        final = client.text("/metrics")
        client.close()
    return {
        "started": started,
        "seconds": seconds,
        "timings": timings,
        "samples": samples,
        "stats": stats,
        "jobs": jobs_out,
        "recovered_seconds": recovered,
        "final": final,
        "verdicts": verdicts(samples),
        "argv": argv,
    }


def _all_up(client: c.Client) -> bool:
    up = [v for _, v in c.samples(client.text("/metrics"), "npu_up")]
    return len(up) == c.EXPECTED_CHIPS and all(v == 1 for v in up)


# --- SOAK.md -----------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(_fmt(x) for x in row) + " |" for row in rows]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render(result: dict[str, Any]) -> str:
    verdict = result["verdicts"]
    flat = all(v["flat"] for v in verdict.values())
    stats: Stats = result["stats"]
    jobs = result["jobs"]
    samples: list[Sample] = result["samples"]
    lat = stats.latencies
    lines = [
        "# cann-exporter soak test",
        "",
        "Generated by `python -m benchmarks.soak` (`make soak`); do not edit, rerun to regenerate.",
        "",
        f"- Date: {result['started']:%Y-%m-%d %H:%M:%S} UTC, {result['seconds']:.0f} s of load",
        (
            f"- Verdict: **{'no growth' if flat else 'GROWTH'}** (linear fit over the settled samples of the second half: "
            "taken after each fault's recovery, before the next fault, at a moment with no npu-smi call in flight; "
            "fewer than 3 of them also fails, as a leaked child would never allow one)"
        ),
        f"- Reproduce: `make soak` (default 1200 s) or `SOAK_SECONDS={result['seconds']:.0f} .venv/bin/python -m benchmarks.soak`",
        f"- Exporter: `{' '.join(shlex.quote(a) for a in result['argv'][1:])}` with {c.SIM_PROCESSES_PER_DIE} processes per die",
        (
            f"- Load: {JOBS} hook jobs (~20 steps/s each), a scrape every {SCRAPE_EVERY:g} s with Prometheus' headers, "
            f"a fault every {fault_schedule(result['seconds']):.0f} s for a third of it: {', '.join(FAULTS)}"
        ),
        "",
        "## Growth",
        "",
    ]
    lines += _table(
        ["resource", "settled samples", "mean", "slope per hour", "drift over the 2nd half", "allowed", "flat"],
        [
            [k, v["points"], v["mean"], v["slope_per_hour"], v["drift_over_second_half"], v["limit"], "yes" if v["flat"] else "**NO**"]
            for k, v in verdict.items()
        ],
    )
    sent = sum(j.get("steps", 0) for j in jobs.values())
    dropped = sum(j.get("dropped", 0) for j in jobs.values())
    lines += ["", "## Service during the soak", ""]
    lines += _table(
        ["figure", "value"],
        [
            ["scrapes", stats.scrapes],
            ["scrape failures", stats.scrape_failures],
            [
                "scrape p50 / p99 / max (ms)",
                f"{1000 * c.percentile(lat, 50):.1f} / {1000 * c.percentile(lat, 99):.1f} / {1000 * max(lat, default=math.nan):.1f}",
            ],
            ["faults injected", sum(1 for _, f in stats.faults if f != "(none)")],
            ["steps recorded by the jobs", sent],
            ["steps dropped by the hooks", dropped],
            ["ready after start (s)", result["timings"]["readyz_seconds"]],
            ["all chips back after the last fault (s)", result["recovered_seconds"]],
        ],
    )
    errors = sorted(((lab["source"], lab["reason"], v) for lab, v in c.samples(result["final"], "cann_exporter_source_errors_total")))
    lines += ["", "## What the self-metrics said (end of run)", ""]
    lines += _table(["source", "reason", "errors"], [list(e) for e in errors] or [["-", "-", 0]])
    lines += [
        "",
        "## Samples",
        "",
        (
            "Samples of the exporter process. fds, threads and children (live descendants) are read "
            "at a moment with no npu-smi call in flight when there is one (readings every 50 ms for up to 0.5 s, "
            "5 s for settled samples; the one with the fewest children is kept)."
        ),
        "",
    ]
    step = max(1, len(samples) // 40)
    shown = sorted({*samples[::step], *(s for s in samples if s.settled)}, key=lambda s: s.t)
    lines += _table(
        ["t (s)", "RSS (MiB)", "fds", "threads", "children", "settled"],
        [[round(s.t), s.rss_mib, s.fds, s.threads, s.children, "yes" if s.settled else ""] for s in shown],
    )
    lines += ["", "## Machine", ""]
    lines += _table(["", ""], [[k, v] for k, v in machine().items()])
    return "\n".join(lines) + "\n"


def main() -> int:
    if not math.isfinite(SECONDS) or SECONDS <= 0:
        print("SOAK_SECONDS must be a positive number of seconds", file=sys.stderr)
        return 2
    print(f"soak: {SECONDS:.0f} s; results in {OUT}", flush=True)
    result = run_soak(SECONDS)
    OUT.write_text(render(result), encoding="utf-8")
    flat = all(v["flat"] for v in result["verdicts"].values())
    for name, v in result["verdicts"].items():
        print(f"{name}: slope {v['slope_per_hour']:.3g}/h, drift {v['drift_over_second_half']:.3g} ({'flat' if v['flat'] else 'GROWING'})")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
