"""Ingest throughput on loopback: training steps per second into a real exporter, with batching.

The exporter runs as its own process on 127.0.0.1 (simulator, default settings). Two
measurements, one after the other, on the 2 cores:

- hooks -> exporter: one Monitor records STEPS steps (samples and two phases each) as fast
  as the loop can; its sender thread batches and POSTs them. Throughput = steps /
  (first step -> the exporter's /metrics counting all of them). Goal >= 20,000 steps/s.
- exporter alone: pre-encoded batches of BATCH steps POSTed back to back on one
  keep-alive connection for SECONDS; accepted steps per second (the server's ceiling).
- goodput accounting: validation + store in-process against the ingest as it was before
  goodput (the ledger's step and phase accounting replaced by nothing), on the same steps
  without an index (what a client that sends none costs; goal: within 5% of the baseline's
  steps/s), and with the steps carrying their training-step index (the index's own JSON
  decoding and check included); rotating rounds in the same process, a fresh store each round.

    python -m benchmarks.ingest_throughput    (env BENCH_INGEST_STEPS, BENCH_INGEST_SECONDS,
                                               BENCH_INGEST_GOODPUT_ROUNDS)
"""

from __future__ import annotations

import http.client
import json
import os
import time
from typing import Any

from benchmarks import _common as c

STEPS = int(os.environ.get("BENCH_INGEST_STEPS", "200000"))
SECONDS = float(os.environ.get("BENCH_INGEST_SECONDS", "5"))
BATCH = 2000
GOAL = 20_000.0
GOODPUT_ROUNDS = int(os.environ.get("BENCH_INGEST_GOODPUT_ROUNDS", "20"))
GOODPUT_BATCHES = 10  # batches of BATCH steps per round and variant
GOODPUT_GOAL = 0.95  # with accounting / without, steps/s


def _iterations(client: c.Client, job: str) -> float:
    return c.sample_value(client.text("/metrics"), "npu_job_iterations_total", job_name=job, rank="0") or 0.0


def through_hooks(url: str, client: c.Client, proc: c.Process, steps: int = STEPS) -> dict[str, Any]:
    from exporter.hooks import Monitor

    job = "bench-hooks"
    mon = Monitor(job, url=url, buffer_size=steps + 1, batch_size=BATCH, flush_interval=0.05)
    start = time.perf_counter()
    for _ in range(steps):
        with mon.step(samples=32):
            with mon.phase("h2d"):
                pass
            with mon.phase("compute"):
                pass
    produced = time.perf_counter() - start
    mon.flush(timeout=120)
    c.wait_until(f"{steps} steps on /metrics", lambda: _iterations(client, job) >= steps, 120, every=0.02, procs=[proc])
    elapsed = time.perf_counter() - start
    mon.close()
    stats = mon.stats()
    if stats["dropped"]:
        raise c.BenchError(f"the client dropped {stats['dropped']} steps")
    return {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_second": steps / elapsed,
        "loop_seconds": produced,
        "batches_of": BATCH,
        "client": stats,
    }


def server_alone(port: int, seconds: float = SECONDS) -> dict[str, Any]:
    conn = http.client.HTTPConnection(c.HOST, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    accepted = posts = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        end = time.time()
        steps = [{"end": end, "duration": 0.05, "samples": 32, "phases": {"h2d": 0.005, "compute": 0.04}}] * BATCH
        body = json.dumps({"job_name": "bench-server", "rank": 0, "steps": steps}, separators=(",", ":")).encode()
        conn.request("POST", "/api/v1/steps", body=body, headers=headers)
        resp = conn.getresponse()
        answer = resp.read()
        if resp.status != 200:
            raise c.BenchError(f"POST answered {resp.status}: {answer[:200]!r}")
        accepted += json.loads(answer)["accepted"]
        posts += 1
    elapsed = time.perf_counter() - start
    conn.close()
    return {"steps": accepted, "posts": posts, "seconds": elapsed, "steps_per_second": accepted / elapsed, "body_bytes": len(body)}


def validation_alone(seconds: float = SECONDS) -> dict[str, Any]:
    """The same batches through parse_batch + IngestStore.accept in-process: the floor under
    the server's rate, so its ratio shows what HTTP and the event loop add."""
    from exporter.jobs.store import IngestStore
    from exporter.jobs.validate import parse_batch

    store = IngestStore()
    steps = [{"end": time.time(), "duration": 0.05, "samples": 32, "phases": {"h2d": 0.005, "compute": 0.04}}] * BATCH
    body = json.dumps({"job_name": "bench-inprocess", "rank": 0, "steps": steps}, separators=(",", ":")).encode()
    accepted = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        accepted += store.accept(parse_batch(body, store.limits, time.time()))
    elapsed = time.perf_counter() - start
    return {"steps": accepted, "seconds": elapsed, "steps_per_second": accepted / elapsed}


def goodput_cost(rounds: int = GOODPUT_ROUNDS) -> dict[str, Any]:
    """Steps/s through parse_batch + IngestStore.accept without the goodput ledger (no index,
    Ledger.step and Ledger.phases doing nothing), with it on the same steps, and with it on
    indexed steps, the three in rotating order."""
    import statistics

    from exporter.jobs import goodput
    from exporter.jobs.store import IngestStore
    from exporter.jobs.validate import parse_batch

    def bodies(indexed: bool) -> list[bytes]:
        out, end = [], time.time() - GOODPUT_BATCHES * BATCH * 0.05
        for b in range(GOODPUT_BATCHES):
            steps = []
            for i in range(BATCH):
                end += 0.05
                step = {"end": end, "duration": 0.04, "samples": 32, "phases": {"h2d": 0.005, "compute": 0.03}}
                if indexed:
                    step["index"] = b * BATCH + i
                steps.append(step)
            out.append(json.dumps({"job_name": "bench-goodput", "rank": 0, "steps": steps}, separators=(",", ":")).encode())
        return out

    with_index, without = bodies(True), bodies(False)
    real_step, real_phases = goodput.Ledger.step, goodput.Ledger.phases

    def one(batches: list[bytes], accounting: bool) -> float:
        if not accounting:
            goodput.Ledger.step = lambda self, end, duration, phases, index: True  # type: ignore[method-assign]
            goodput.Ledger.phases = lambda self, end, phases: None  # type: ignore[method-assign]
        try:
            store = IngestStore()
            start = time.perf_counter()
            for body in batches:
                store.accept(parse_batch(body, store.limits, time.time()))
            return GOODPUT_BATCHES * BATCH / (time.perf_counter() - start)
        finally:
            goodput.Ledger.step, goodput.Ledger.phases = real_step, real_phases  # type: ignore[method-assign]

    variants = {"indexed": (with_index, True), "same": (without, True), "baseline": (without, False)}
    for batches, accounting in variants.values():  # warm-up
        one(batches, accounting)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            rates[name].append(one(*variants[name]))

    def ratios(name: str) -> list[float]:
        return [a / b for a, b in zip(rates[name], rates["baseline"], strict=True)]

    return {
        "rounds": rounds,
        "steps_per_round": GOODPUT_BATCHES * BATCH,
        "baseline_steps_per_second_median": statistics.median(rates["baseline"]),
        "same_steps_per_second_median": statistics.median(rates["same"]),
        "same_ratio_median": statistics.median(ratios("same")),
        "accounted_steps_per_second_median": statistics.median(rates["indexed"]),
        "ratio_median": statistics.median(ratios("indexed")),
        "ratio_min": min(ratios("indexed")),
    }


def run() -> dict[str, Any]:
    with c.ingest_exporter() as (proc, client):
        hooks = through_hooks(f"http://{c.HOST}:{client.port}", client, proc)
        server = server_alone(client.port)
    floor = validation_alone()
    cost = goodput_cost()
    rate = hooks["steps_per_second"]
    return {
        "title": "Ingest throughput on loopback (POST /api/v1/steps, batches of 2,000 steps)",
        "summary": (
            f"{rate:,.0f} steps/s from a Monitor into the exporter, end to end; "
            f"the exporter alone accepts {server['steps_per_second']:,.0f} steps/s; with goodput accounting "
            f"the ingest keeps {cost['same_ratio_median']:.1%} of its steps/s without it on the same steps, "
            f"{cost['ratio_median']:.1%} when the steps carry an index."
        ),
        "figures": [
            c.figure(
                "hooks -> exporter, steps/s",
                round(rate),
                "steps/s",
                goal=f">= {GOAL:,.0f}",
                meets_goal=rate >= GOAL,
                baseline_name="exporter alone",
                baseline=round(server["steps_per_second"]),
            ),
            c.figure(
                "exporter alone, steps/s",
                round(server["steps_per_second"]),
                "steps/s",
                baseline_name="validation + store in-process, no HTTP",
                baseline=round(floor["steps_per_second"]),
            ),
            c.figure(
                "validation + store with goodput accounting, same steps, steps/s (median)",
                round(cost["same_steps_per_second_median"]),
                "steps/s",
                baseline_name="without accounting",
                baseline=round(cost["baseline_steps_per_second_median"]),
                ratio_value=cost["same_ratio_median"],
                goal=f">= {GOODPUT_GOAL:.0%} of the baseline",
                meets_goal=cost["same_ratio_median"] >= GOODPUT_GOAL,
            ),
            c.figure(
                "validation + store with goodput accounting, indexed steps, steps/s (median)",
                round(cost["accounted_steps_per_second_median"]),
                "steps/s",
                baseline_name="the same steps without index or accounting",
                baseline=round(cost["baseline_steps_per_second_median"]),
                ratio_value=cost["ratio_median"],
            ),
        ],
        "raw": c.rounded({"hooks": hooks, "server_alone": server, "validation_alone": floor, "goodput_cost": cost}),
        "notes": [
            f"{hooks['steps']:,} steps through one Monitor (2 phases + samples each); time from the first step "
            "until the exporter's /metrics counted all of them; nothing dropped.",
            f"Server alone: pre-encoded {BATCH}-step batches on one keep-alive connection for {SECONDS:g} s.",
            "Client, its sender thread and the exporter share the machine's 2 cores.",
            f"Goodput accounting: {cost['rounds']} rotating rounds of {cost['steps_per_round']:,} steps per variant, "
            "in-process (parse_batch + IngestStore.accept, a fresh store each round); each ratio is the median of the "
            "per-round ratios (with accounting / without). An index adds its JSON number to decode and check to every "
            "step: the difference between the two ratios.",
        ],
        "command": "python -m benchmarks.ingest_throughput",
    }


if __name__ == "__main__":
    c.main(run)
