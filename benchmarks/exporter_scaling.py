"""Cost per scrape against series count, and cost per data change against the changed part's size.

One exporter (simulator, a3, 16 dies, 64 processes, network off: about 570 samples of its
own) with the ingest caps raised (``--ingest.max-jobs``, ``--ingest.max-ranks``,
``--ingest.max-series`` when the flag exists) grows its jobs part in steps to each size of
BENCH_SCALING_SIZES (total samples in the text format, default about 1k, 3k, 10k, 30k, 100k):
ranks are added by POSTing one step with every phase, samples and memory to
/api/v1/steps (job_name x rank, 64 ranks a job), 35 series each. At each size:

- steady: for BENCH_SCALING_SECONDS, rounds of four scrapes on keep-alive connections:
  ours and a static-bytes aiohttp server (benchmarks/_static_server.py, serving ours' body
  of that size captured just before, with the same headers), each with plain headers (text
  0.0.4, no compression) and Prometheus' (OpenMetrics + gzip), order rotating every round.
  No POST meanwhile: the jobs part does not change. The sampler keeps running (npu-smi every
  10 s, the exporter's own process every 5 s), so a few scrapes come first after a sampled
  part changed: they are told apart (a fingerprint of the text before the jobs part) and
  reported on their own ("after a sampled change"), and p50/p99 are given over all the
  scrapes and over the unchanged ones. The exporter's CPU seconds over the loop divided by
  its scrapes (psutil, all threads) is the CPU per scrape.
- jobs change: BENCH_SCALING_CHANGES times, one more POST (a step for a rank that exists:
  only the jobs part changes), a wait of 1.2 s (jobs changes are read at most once a
  second), then the first scrape in each header set (it re-encodes the jobs part; with gzip
  it compresses the whole new body) and a second one (cached) for reference.

Figures: p50/p99 at the largest size against the smallest (baseline) in the same run; flat is
the goal for what the exporter adds on top of moving the bytes, so the static floor at the
same size is shown beside it. Cost per change: the first scrape after a jobs change minus the
cached one, per jobs series (flat across sizes = proportional to the changed part), and the
first scrape after a sampled change (its part does not grow with the jobs).

    python -m benchmarks.exporter_scaling
        (env BENCH_SCALING_SIZES, default 1000,3000,10000,30000,100000;
         BENCH_SCALING_SECONDS, default 6; BENCH_SCALING_CHANGES, default 3)
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import statistics
import time
import zlib
from typing import Any

import psutil

from benchmarks import _common as c

SIZES = sorted(int(s) for s in os.environ.get("BENCH_SCALING_SIZES", "1000,3000,10000,30000,100000").split(",") if s.strip())
SECONDS = float(os.environ.get("BENCH_SCALING_SECONDS", "6"))
CHANGES = int(os.environ.get("BENCH_SCALING_CHANGES", "3"))
RANKS_PER_JOB = 64
SERIES_PER_RANK = 35  # exporter/jobs/metrics.py SERIES_PER_RANK: what a full rank renders
LIVE_INTERVAL_WAIT = 1.2  # jobs changes are read at most once a second (exporter/node/assembly.py)
MAX_ROUNDS = 20_000  # a bound on the steady loop whatever the timings
MODES = {"plain": c.PLAIN_HEADERS, "prometheus": c.PROMETHEUS_HEADERS}
PHASES = ("data", "h2d", "compute", "communication", "d2h", "framework", "other")
JOBS_MARKER = b"\n# HELP npu_job_"
INFO_RUNS = b'cann_exporter_source_runs_total{source="npu_smi_info"} '


class Ingest:
    """POSTs steps on one keep-alive connection: one new or existing (job, rank) per call."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(c.HOST, port, timeout=30)
        self.posts = 0

    @staticmethod
    def job_rank(index: int) -> tuple[str, int]:
        return f"scale-{index // RANKS_PER_JOB:03d}", index % RANKS_PER_JOB

    def post(self, index: int, duration: float = 0.05) -> None:
        job, rank = self.job_rank(index)
        step = {"end": time.time(), "duration": duration, "samples": 32, "phases": {p: duration / len(PHASES) for p in PHASES}}
        body = json.dumps(
            {
                "job_name": job,
                "rank": rank,
                "world_size": RANKS_PER_JOB,
                "device": str(rank % 16),
                "framework": "pytorch",
                "pid": 1000 + index,
                "memory": {"allocated_bytes": 1 << 30, "max_allocated_bytes": 2 << 30},
                "steps": [step],
            },
            separators=(",", ":"),
        ).encode()
        self.conn.request("POST", "/api/v1/steps", body=body, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        answer = response.read()
        if response.status != 200:
            raise c.BenchError(f"POST {job}/{rank} answered {response.status}: {answer[:200]!r}")
        self.posts += 1

    def close(self) -> None:
        self.conn.close()


class Sampled:
    """Per header set, what the last scrape of ours showed of the sampled parts: a scrape is
    'after a sampled change' when the text before the jobs part (chips, processes, the
    exporter's own status and process) differs from the previous scrape's in the same format,
    and 'after a chip change' when npu-smi info's run count moved too."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[bytes, float | None]] = {}

    def classify(self, mode: str, body: bytes) -> tuple[bool, bool]:
        prefix = _before_jobs(body, gzipped=mode == "prometheus")
        fingerprint = hashlib.blake2b(prefix, digest_size=16).digest()
        runs = None
        at = prefix.find(INFO_RUNS)
        if at >= 0:
            runs = float(prefix[at + len(INFO_RUNS) : prefix.find(b"\n", at)])
        previous = self.last.get(mode)
        self.last[mode] = (fingerprint, runs)
        if previous is None:
            return False, False
        return fingerprint != previous[0], runs != previous[1]


def _before_jobs(body: bytes, gzipped: bool) -> bytes:
    """The text up to the jobs part; a gzip body is inflated only that far."""
    if not gzipped:
        end = body.find(JOBS_MARKER)
        return body[: end if end >= 0 else len(body)]
    inflate = zlib.decompressobj(wbits=31)
    text, tail = b"", body
    while True:
        text += inflate.decompress(tail, 1 << 18)
        tail = inflate.unconsumed_tail
        end = text.find(JOBS_MARKER)
        if end >= 0:
            return text[:end]
        if not tail:
            return text


def _get(client: c.Client, headers: dict[str, str]) -> tuple[bytes, float]:
    status, _, body, seconds = client.get("/metrics", headers)
    if status != 200:
        raise c.BenchError(f"/metrics answered HTTP {status}")
    return body, seconds


def _steady(ours: c.Client, static: c.Client, proc: psutil.Process) -> dict[str, Any]:
    """Rounds of (ours, static) x (plain, prometheus) for SECONDS; per target and mode the
    latencies, ours' split by whether the scrape came first after a sampled part changed."""
    names = [(t, m) for m in MODES for t in ("ours", "static")]
    clients = {"ours": ours, "static": static}
    all_lat: dict[tuple[str, str], list[float]] = {k: [] for k in names}
    unchanged: dict[str, list[float]] = {m: [] for m in MODES}
    after_change: dict[str, list[float]] = {m: [] for m in MODES}
    after_chip: dict[str, list[float]] = {m: [] for m in MODES}
    sampled = Sampled()
    for mode, headers in MODES.items():
        sampled.classify(mode, _get(ours, headers)[0])
    cpu0 = sum(proc.cpu_times()[:2])
    start = time.monotonic()
    rounds = 0
    while time.monotonic() - start < SECONDS and rounds < MAX_ROUNDS:
        for target, mode in c.scrape_orders(names, rounds):
            body, seconds = _get(clients[target], MODES[mode])
            all_lat[(target, mode)].append(seconds)
            if target == "ours":
                changed, chip = sampled.classify(mode, body)
                (after_change if changed else unchanged)[mode].append(seconds)
                if chip:
                    after_chip[mode].append(seconds)
        rounds += 1
    elapsed = time.monotonic() - start
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    out: dict[str, Any] = {
        "rounds": rounds,
        "seconds": elapsed,
        "exporter_cpu_ms_per_scrape": 1000 * cpu / (rounds * len(MODES)) if rounds else None,
    }
    for target, mode in names:
        out[f"{target}_{mode}"] = c.latency_summary(all_lat[(target, mode)])
    for mode in MODES:
        out[f"ours_{mode}_unchanged"] = c.latency_summary(unchanged[mode])
        out[f"ours_{mode}_after_sampled_change_ms"] = [v * 1000 for v in after_change[mode]]
        out[f"ours_{mode}_after_chip_change_ms"] = [v * 1000 for v in after_chip[mode]]
    return out


def _jobs_changes(ours: c.Client, ingest: Ingest, ranks: int) -> dict[str, Any]:
    """First scrape after a jobs-only change vs the cached one after it, per header set.

    Each change: a scrape per header set (the reference: everything encoded), one POST, the
    wait, the first scrape per header set, a second one. When a sampled part changed in
    between too (the exporter's own process is sampled every 5 s), the first scrape also
    re-encoded that small part: such changes are used only when fewer than CHANGES clean
    ones came in CHANGES + 2 tries, and counted as 'mixed_used'."""
    clean: list[dict[str, float]] = []
    mixed: list[dict[str, float]] = []
    sampled = Sampled()
    for attempt in range(1, CHANGES + 3):
        if len(clean) >= CHANGES:
            break
        for mode, headers in MODES.items():
            sampled.classify(mode, _get(ours, headers)[0])
        ingest.post(attempt % max(ranks, 1))
        time.sleep(LIVE_INTERVAL_WAIT)
        timing: dict[str, float] = {}
        changed = False
        for mode, headers in MODES.items():
            body, timing[f"{mode}_first"] = _get(ours, headers)
            changed = sampled.classify(mode, body)[0] or changed
        for mode, headers in MODES.items():
            timing[f"{mode}_cached"] = _get(ours, headers)[1]
        (mixed if changed else clean).append(timing)
    used = clean if len(clean) >= CHANGES or not mixed else clean + mixed[: CHANGES - len(clean)]
    out: dict[str, Any] = {"changes": len(used), "clean": len(clean), "mixed_seen": len(mixed), "mixed_used": len(used) - len(clean)}
    for mode in MODES:
        firsts = [t[f"{mode}_first"] * 1000 for t in used]
        out[f"{mode}_first_ms"] = statistics.median(firsts) if firsts else None
        out[f"{mode}_cached_ms"] = statistics.median(t[f"{mode}_cached"] * 1000 for t in used) if used else None
        out[f"{mode}_first_all_ms"] = firsts
    return out


def _fit(points: list[tuple[float, float]]) -> tuple[float | None, float | None]:
    """Least-squares (slope, intercept) of (x, y) points; None without two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None, None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def run() -> dict[str, Any]:
    notes: list[str] = []
    base_guess = 600
    max_ranks = max(1, math.ceil((SIZES[-1] - base_guess) / SERIES_PER_RANK) + 64)
    caps = ["--ingest.max-jobs", str(math.ceil(max_ranks / RANKS_PER_JOB) + 1), "--ingest.max-ranks", str(RANKS_PER_JOB)]
    if c.has_flag("--ingest.max-series"):
        caps += ["--ingest.max-series", str((max_ranks + 1) * SERIES_PER_RANK)]
    else:
        notes.append("`serve --help` lists no --ingest.max-series: not passed.")
    port = c.free_port()
    levels: list[dict[str, Any]] = []
    with c.started("cann-exporter", c.exporter_argv(port, *caps), c.exporter_env()) as proc_handle:
        ours = c.Client(port, timeout=60)
        ingest = Ingest(port)
        try:
            startup = c.wait_exporter_complete(proc_handle, ours)
            proc = psutil.Process(proc_handle.pid)
            ranks = 0
            time.sleep(LIVE_INTERVAL_WAIT)
            base = c.count_samples(ours.text("/metrics"))
            for target in SIZES:
                want = max(ranks, math.ceil(max(0, target - base) / SERIES_PER_RANK))
                grow_start = time.monotonic()
                while ranks < want:
                    ingest.post(ranks)
                    ranks += 1
                grow_seconds = time.monotonic() - grow_start
                time.sleep(LIVE_INTERVAL_WAIT)
                headers_plain, body_plain = c.capture(ours, c.PLAIN_HEADERS)
                headers_prom, body_prom = c.capture(ours, c.PROMETHEUS_HEADERS)
                samples = c.count_samples(body_plain.decode("utf-8", errors="replace"))
                bodies = {
                    "plain": (c.PLAIN_HEADERS, headers_plain, body_plain),
                    "prometheus": (c.PROMETHEUS_HEADERS, headers_prom, body_prom),
                }
                with c.static_server(bodies) as static_port:
                    static = c.Client(static_port, timeout=60)
                    try:
                        steady = _steady(ours, static, proc)
                    finally:
                        static.close()
                changes = _jobs_changes(ours, ingest, ranks)
                proc_handle.check_alive()
                levels.append(
                    {
                        "target": target,
                        "samples": samples,
                        "ranks": ranks,
                        "jobs_series": ranks * SERIES_PER_RANK,
                        "plain_bytes": len(body_plain),
                        "prometheus_gzip_bytes": len(body_prom),
                        "grow_seconds": grow_seconds,
                        "rss_mib": proc.memory_info().rss / 2**20,
                        "steady": steady,
                        "jobs_change": changes,
                    }
                )
        finally:
            ingest.close()
            ours.close()

    small, large = levels[0], levels[-1]
    figures = []
    for mode in MODES:
        for q in ("p50", "p99"):
            value, base_v = large["steady"][f"ours_{mode}"][f"{q}_ms"], small["steady"][f"ours_{mode}"][f"{q}_ms"]
            figures.append(
                c.figure(
                    f"/metrics {q} at {large['samples']:,} samples ({mode} headers)",
                    value,
                    "ms",
                    baseline_name=f"at {small['samples']:,} samples",
                    baseline=base_v,
                )
            )
        value, base_v = large["steady"][f"ours_{mode}"]["p99_ms"], large["steady"][f"static_{mode}"]["p99_ms"]
        figures.append(
            c.figure(
                f"/metrics p99 at {large['samples']:,} samples ({mode} headers) vs static bytes",
                value,
                "ms",
                baseline_name="static-bytes aiohttp p99, same body",
                baseline=base_v,
            )
        )
    figures.append(
        c.figure(
            f"exporter CPU per scrape at {large['samples']:,} samples",
            large["steady"]["exporter_cpu_ms_per_scrape"],
            "ms",
            baseline_name=f"at {small['samples']:,} samples",
            baseline=small["steady"]["exporter_cpu_ms_per_scrape"],
        )
    )
    fits = {}
    for mode in MODES:
        value, base_v = _extra_ms(large, mode), _extra_ms(small, mode)
        grown = large["jobs_series"] / max(small["jobs_series"], 1)
        figures.append(
            c.figure(
                f"jobs change: first scrape's extra time at {large['jobs_series']:,} jobs series, {grown:.0f}x the smallest "
                f"({mode} headers; proportional: ratio near {grown:.0f})",
                value,
                "ms",
                baseline_name=f"at {small['jobs_series']:,} jobs series",
                baseline=base_v,
            )
        )
        points = [(lv["jobs_series"], _extra_ms(lv, mode)) for lv in levels if _extra_ms(lv, mode) is not None]
        slope, intercept = _fit(points)
        fits[mode] = {"us_per_jobs_series": None if slope is None else slope * 1000, "fixed_ms": intercept}

    rows, change_rows = [], []
    for level in levels:
        s = level["steady"]
        row: dict[str, Any] = {
            "samples": level["samples"],
            "jobs series": level["jobs_series"],
            "plain MB": level["plain_bytes"] / 1e6,
            "gzip MB": level["prometheus_gzip_bytes"] / 1e6,
        }
        for mode in MODES:
            row[f"{mode} p50 ms"] = s[f"ours_{mode}"]["p50_ms"]
            row[f"{mode} p99 ms"] = s[f"ours_{mode}"]["p99_ms"]
            row[f"{mode} p99 unchanged ms"] = s[f"ours_{mode}_unchanged"].get("p99_ms")
            row[f"static {mode} p99 ms"] = s[f"static_{mode}"]["p99_ms"]
        row["CPU ms/scrape"] = s["exporter_cpu_ms_per_scrape"]
        row["RSS MiB"] = level["rss_mib"]
        rows.append(row)
        j = level["jobs_change"]
        change_row: dict[str, Any] = {"samples": level["samples"], "jobs series": level["jobs_series"]}
        for mode in MODES:
            change_row[f"{mode} first after jobs change ms"] = j[f"{mode}_first_ms"]
            change_row[f"{mode} cached ms"] = j[f"{mode}_cached_ms"]
            change_row[f"{mode} extra us/jobs series"] = _per_series_us(level, mode)
            after = s[f"ours_{mode}_after_sampled_change_ms"]
            change_row[f"{mode} first after sampled change ms"] = statistics.median(after) if after else None
        rows_after_chip = s["ours_plain_after_chip_change_ms"]
        change_row["sampled changes seen (chip)"] = f"{len(s['ours_plain_after_sampled_change_ms'])} ({len(rows_after_chip)})"
        change_row["jobs changes (mixed used)"] = f"{j['changes']} ({j['mixed_used']})"
        change_rows.append(change_row)
    notes += [
        f"Exporter: `python -m exporter serve` on replayed npu-smi and hccn_tool (benchmarks/_replay.py: the simulator's a3 answers, healthy, captured once) `--no-hccn.enabled {' '.join(caps)}` "
        f"(CANN_SIM_PROCESSES=4); its own series before any job: about {levels[0]['samples'] - levels[0]['jobs_series']:,} "
        f"samples; ranks added {RANKS_PER_JOB} a job, {SERIES_PER_RANK} series each (every phase, samples, memory).",
        f"Steady: {SECONDS:g} s of rounds per size, no POST; a scrape of ours is 'after a sampled change' when the "
        "text before the jobs part differs from the previous scrape's in the same header set (npu-smi every 10 s, the exporter's own process every "
        "5 s: these re-encode a small part, and with gzip compress the whole body again). p50/p99 in the figures are over "
        "all scrapes; the 'unchanged' column leaves those out.",
        f"Jobs change: {CHANGES} POSTs of one step to an existing rank, each after a reference scrape and followed by "
        f"{LIVE_INTERVAL_WAIT:g} s and the first scrape per header set; medians. Extra time = first - cached; per jobs "
        "series flat across sizes means the re-encode is proportional to the changed part. A change that met a sampled "
        "change (the exporter's own process every 5 s) is used only when too few clean ones came ('mixed used').",
        "Least-squares fit of the extra time against jobs series over all sizes: "
        + "; ".join(f"{mode}: {_fmt_fit(fit)}" for mode, fit in fits.items())
        + ".",
        "CPU per scrape: the exporter process's user+system CPU over the steady loop / its scrapes (includes its sampler's "
        "own work in that time, small beside the scrapes).",
    ]
    return {
        "title": f"Cost per scrape and per change against series count ({levels[0]['samples']:,} to {levels[-1]['samples']:,} samples)",
        "summary": (
            "Baseline: the smallest size in the same run. Flat is the goal for what the exporter adds on top of "
            "moving the bytes: compare with the static-bytes server serving the same body at each size."
        ),
        "figures": c.rounded(figures),
        "tables": {"Steady scrapes by size (no data change)": c.rounded(rows), "Cost of a data change by size": c.rounded(change_rows)},
        "raw": c.rounded({"levels": levels, "jobs_change_fit": fits, "startup": startup, "caps": caps}),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_scaling",
    }


def _fmt_fit(fit: dict[str, float | None]) -> str:
    if fit["us_per_jobs_series"] is None or fit["fixed_ms"] is None:
        return "n/a"
    return f"{fit['us_per_jobs_series']:.2f} us per jobs series + {fit['fixed_ms']:.1f} ms"


def _extra_ms(level: dict[str, Any], mode: str) -> float | None:
    """First scrape after a jobs change minus the cached scrape after it."""
    j = level["jobs_change"]
    first, cached = j[f"{mode}_first_ms"], j[f"{mode}_cached_ms"]
    return None if first is None or cached is None else first - cached


def _per_series_us(level: dict[str, Any], mode: str) -> float | None:
    extra = _extra_ms(level, mode)
    return None if extra is None or not level["jobs_series"] else 1000 * extra / level["jobs_series"]


if __name__ == "__main__":
    c.main(run)
