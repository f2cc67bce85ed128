"""Under abuse: /healthz and a correct scraper stay fast, and memory stays bounded, while the
exporter is flooded from loopback.

The exporter runs as its own process on 127.0.0.1 (simulator, a3 with its network metrics,
about 1,800 samples) with a web config holding one basic-auth user (bcrypt, cost 10) and an
ingest bearer token; its connection cap is passed explicitly when `serve --help` lists
``--web.max-connections`` (else that sub-part is skipped, with a note). Two windows, one
after the other, measured by the same client code in this process (an asyncio loop):

- quiet (BENCH_ABUSE_QUIET_SECONDS, default 5): only the measuring clients;
- abuse (BENCH_ABUSE_SECONDS, default 60: about 600 probes, so that p99 is not the luck of
  two or three of them): the same, while a separate process
  (benchmarks/_abuse_load.py, so its CPU does not delay our timers) at once
  * ingests at the default caps (4 jobs x 16 ranks = the 2,240-series budget) with batches
    back to back, and every tenth POST a job that does not fit;
  * runs BENCH_ABUSE_AUTH_CLIENTS (200) basic-auth clients with wrong passwords, each on its
    own keep-alive connection from its own loopback address (127.1.x.y: the per-address
    failure budget sees 200 clients), one attempt per BENCH_ABUSE_AUTH_PAUSE (0.1 s) each;
  * fills the rest of the connection cap with idle connections and connections that never
    read (half pipelining authenticated /metrics, half bursts of unauthenticated /healthz),
    plus BENCH_ABUSE_OVERFLOW (16) idle ones beyond the cap, all reconnecting when closed;
  * stalls BENCH_ABUSE_STALLED (220) ingest bodies announced at 1 MiB one byte short (with the
    token, from 8 addresses), reconnecting when answered (503 past the budget of bodies in
    flight) or closed;
  * churns BENCH_ABUSE_CHURN (600) clients from 6 addresses, each connecting, silent for 0.9 s,
    closing, again (several hundred new connections a second);
  * sends `Content-Length: abc` from BENCH_ABUSE_MALFORMED (4) addresses back to back.
  Silent TLS handshakes are not part of it (the exporter here serves plain HTTP); the hostile
  suite (tests/web/test_hostile_front.py) measures them against a TLS `serve`.

Measured in both windows:

- /healthz p99: a kubelet-like probe every 0.1 s on a new connection (Connection: close),
  from connecting to the last byte; goal < 250 ms under abuse;
- a correct scraper's p99: 5 scrapers with valid credentials and Prometheus' headers, each on
  its own keep-alive connection opened before the abuse, one scrape every
  BENCH_ABUSE_SCRAPE_PAUSE (0.2 s); goal < 1 s under abuse;
- the exporter's RSS (psutil, every 50 ms): peak; goal < 200 MiB.

A failed or non-200 request counts in the percentiles as its timeout (probe 2 s, scrape 10 s),
so failures cannot hide. Baselines: the quiet window in the same run.

Then issue 45, every budget against one address (benchmarks/_abuse_one_address.py, each part
with an exporter of its own and a baseline measured just before): TLS probe latency beside a
one-address handshake hog, the failures of a keep-alive scraper, the hooks' sender and probes
beside 300 silent connections a second from their own address, and the correct-password 429s
and failed scrapes of a scraper starting together with 4 guessers against a cost-14 user;
then (benchmarks/_abuse_profiles.py) the RSS of an exporter given three exports of 60,000
1,000-character operator names, and the CPU time of the 5-million-op communication.json.
Their figures follow the ones above.

    python -m benchmarks.exporter_abuse
        (env BENCH_ABUSE_SECONDS, BENCH_ABUSE_QUIET_SECONDS, BENCH_ABUSE_AUTH_CLIENTS,
         BENCH_ABUSE_AUTH_ADDRESSES, BENCH_ABUSE_AUTH_PAUSE, BENCH_ABUSE_SCRAPE_PAUSE,
         BENCH_ABUSE_MAX_CONNECTIONS, BENCH_ABUSE_SLOW, BENCH_ABUSE_OVERFLOW, BENCH_ABUSE_STALLED,
         BENCH_ABUSE_CHURN, BENCH_ABUSE_MALFORMED)
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import bcrypt
import psutil

from benchmarks import _abuse_one_address, _abuse_profiles
from benchmarks import _common as c
from benchmarks._rawhttp import Connection, basic_auth, request_bytes

SECONDS = float(os.environ.get("BENCH_ABUSE_SECONDS", "60"))
QUIET_SECONDS = float(os.environ.get("BENCH_ABUSE_QUIET_SECONDS", "5"))
AUTH_CLIENTS = int(os.environ.get("BENCH_ABUSE_AUTH_CLIENTS", "200"))
AUTH_ADDRESSES = max(1, int(os.environ.get("BENCH_ABUSE_AUTH_ADDRESSES", str(AUTH_CLIENTS))))
AUTH_PAUSE = float(os.environ.get("BENCH_ABUSE_AUTH_PAUSE", "0.1"))
SCRAPE_PAUSE = float(os.environ.get("BENCH_ABUSE_SCRAPE_PAUSE", "0.2"))
MAX_CONNECTIONS = int(os.environ.get("BENCH_ABUSE_MAX_CONNECTIONS", "256"))
HEALTH_CONNECTIONS = 8
SLOW = int(os.environ.get("BENCH_ABUSE_SLOW", "32"))
OVERFLOW = int(os.environ.get("BENCH_ABUSE_OVERFLOW", str(2 * HEALTH_CONNECTIONS)))
STALLED = int(os.environ.get("BENCH_ABUSE_STALLED", "220"))
CHURN = int(os.environ.get("BENCH_ABUSE_CHURN", "600"))
MALFORMED = int(os.environ.get("BENCH_ABUSE_MALFORMED", "4"))
SCRAPERS = 5
PROBE_EVERY = 0.1
PROBE_TIMEOUT = 2.0
SCRAPE_TIMEOUT = 10.0
RSS_EVERY = 0.05
BCRYPT_COST = 10
INGEST_JOBS, INGEST_RANKS = 4, 16  # the default caps: 64 ranks x 35 = ingest.max_series 2,240
INGEST_BATCH, INGEST_PAUSE = 20, 0.0
USER = "prometheus"
GOAL_HEALTHZ_MS, GOAL_SCRAPE_MS, GOAL_RSS_MIB = 250.0, 1000.0, 200.0
COUNTER_PREFIXES = ("cann_exporter_http_", "cann_exporter_web_auth_", "cann_exporter_ingest_rejected_total", "cann_exporter_ingest_ranks")
FAILURES = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError)


async def _timed(conn: Connection, raw: bytes, latencies: list[float], failures: Counter[str], timeout: float) -> None:
    """One request's latency; a failure or a status other than 200 counts as its timeout."""
    try:
        status, _, _, elapsed = await conn.request(raw)
    except FAILURES as exc:
        failures[type(exc).__name__] += 1
        latencies.append(timeout)
        return
    if status != 200:
        failures[f"HTTP {status}"] += 1
    latencies.append(elapsed if status == 200 else timeout)


async def _window(seconds: float, port: int, scrapers: list[Connection], scrape: bytes, proc: psutil.Process) -> dict[str, Any]:
    """Probes, scrapes and RSS samples for ``seconds``."""
    end = time.monotonic() + seconds
    scrape_lat: list[float] = []
    probe_lat: list[float] = []
    scrape_fail: Counter[str] = Counter()
    probe_fail: Counter[str] = Counter()
    rss: list[int] = []
    probe = request_bytes("GET", "/healthz", {"Connection": "close", "User-Agent": "kube-probe/1.29"})

    async def scraper(conn: Connection) -> None:
        while time.monotonic() < end:
            await _timed(conn, scrape, scrape_lat, scrape_fail, SCRAPE_TIMEOUT)
            await asyncio.sleep(SCRAPE_PAUSE)

    async def prober() -> None:
        while time.monotonic() < end:
            conn = Connection(port, "127.0.0.1", timeout=PROBE_TIMEOUT)
            started = time.perf_counter()
            try:
                await _timed(conn, probe, probe_lat, probe_fail, PROBE_TIMEOUT)
            finally:
                conn.close()
            await asyncio.sleep(max(0.0, PROBE_EVERY - (time.perf_counter() - started)))

    async def sampler() -> None:
        while time.monotonic() < end:
            try:
                rss.append(proc.memory_info().rss)
            except psutil.Error:
                return
            await asyncio.sleep(RSS_EVERY)

    cpu0 = sum(proc.cpu_times()[:2])
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(prober(), sampler(), *(scraper(s) for s in scrapers)), seconds + 3 * SCRAPE_TIMEOUT)
    elapsed = time.monotonic() - started
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    return {
        "seconds": elapsed,
        "healthz": {**c.latency_summary(probe_lat), "failures": dict(probe_fail)},
        "scrape": {**c.latency_summary(scrape_lat), "failures": dict(scrape_fail)},
        "rss_peak_mib": max(rss) / 2**20 if rss else None,
        "rss_last_mib": rss[-1] / 2**20 if rss else None,
        "exporter_cpu_percent": 100 * cpu / elapsed if elapsed else None,
    }


async def _session(port: int, auth: str, proc: psutil.Process, load_config: dict[str, Any], tmp: Path) -> dict[str, Any]:
    scrape = request_bytes("GET", "/metrics", {**c.PROMETHEUS_HEADERS, "Authorization": auth})
    scrapers = [Connection(port, "127.0.0.1", timeout=SCRAPE_TIMEOUT) for _ in range(SCRAPERS)]
    try:
        for conn in scrapers:  # each holds its connection from now on; the first check runs bcrypt
            status, _, _, _ = await conn.request(scrape)
            if status != 200:
                raise c.BenchError(f"a scraper with valid credentials got HTTP {status}")
        quiet = await _window(QUIET_SECONDS, port, scrapers, scrape, proc)
        out_dir = tmp / "load"
        out_dir.mkdir()
        config_path = tmp / "load.json"
        config_path.write_text(json.dumps(load_config), encoding="utf-8")
        with c.started("abuse-load", [sys.executable, "-m", "benchmarks._abuse_load", str(config_path), str(out_dir)]) as load:
            ready_deadline = time.monotonic() + 30
            while not (out_dir / "ready").exists():
                load.check_alive()
                if time.monotonic() > ready_deadline:
                    raise c.BenchError(f"the abuse load did not start within 30 s:\n{load.log_tail()}")
                await asyncio.sleep(0.05)
            load_proc = psutil.Process(load.pid)
            load_cpu0 = sum(load_proc.cpu_times()[:2])
            abuse = await _window(SECONDS, port, scrapers, scrape, proc)
            abuse["load_process_cpu_percent"] = 100 * (sum(load_proc.cpu_times()[:2]) - load_cpu0) / abuse["seconds"]
            (out_dir / "stop").write_text("stop\n")
            stop_deadline = time.monotonic() + 20
            while load.alive() and time.monotonic() < stop_deadline:
                await asyncio.sleep(0.1)
            load_log = load.log_tail(5) if load.popen.returncode else ""
        traffic = json.loads((out_dir / "result.json").read_text()) if (out_dir / "result.json").exists() else {}
    finally:
        for conn in scrapers:
            conn.close()
    return {"quiet": quiet, "abuse": abuse, "traffic": traffic, "load_log": load_log}


def _counters(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(COUNTER_PREFIXES):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def run() -> dict[str, Any]:
    notes: list[str] = []
    for flag in ("--web.config.file", "--ingest.token-file"):
        if not c.has_flag(flag):
            raise c.BenchError(f"`serve --help` lists no {flag}: nothing to measure")
    limits = c.has_flag("--web.max-connections")
    password, token = secrets.token_urlsafe(18), secrets.token_urlsafe(24)
    auth = basic_auth(USER, password)
    with tempfile.TemporaryDirectory(prefix="bench-abuse-") as tmp_name:
        tmp = Path(tmp_name)
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=BCRYPT_COST)).decode()
        (tmp / "web.yml").write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n", encoding="utf-8")
        (tmp / "token").write_text(token + "\n", encoding="utf-8")
        extra = ["--web.config.file", str(tmp / "web.yml"), "--ingest.token-file", str(tmp / "token")]
        if limits:
            extra += ["--web.max-connections", str(MAX_CONNECTIONS)]
            if c.has_flag("--web.health-connections"):
                extra += ["--web.health-connections", str(HEALTH_CONNECTIONS)]
        else:
            notes.append(
                "`serve --help` lists no --web.max-connections: the idle, slow-reader and overflow "
                "connections were not opened (that sub-part skipped)."
            )
        port = c.free_port()
        with c.started("cann-exporter", c.exporter_argv(port, *extra, network=True), c.exporter_env()) as exporter:
            client = c.Client(port, extra_headers={"Authorization": auth})
            try:
                startup = c.wait_network_complete(exporter, client)
                text = client.text("/metrics")
                cap = c.sample_value(text, "cann_exporter_http_max_connections") if limits else None
                samples = c.count_samples(text)
                held = SCRAPERS + 1 + AUTH_CLIENTS
                fill = max(0, int(cap) - held) if cap else 0
                slow = min(SLOW, fill // 2)
                load_config = {
                    "port": port,
                    "max_seconds": SECONDS + 30,
                    "user": USER,
                    "password": password,
                    "ingest_token": token,
                    "ingest_jobs": INGEST_JOBS,
                    "ingest_ranks": INGEST_RANKS,
                    "ingest_batch": INGEST_BATCH,
                    "ingest_pause": INGEST_PAUSE,
                    "auth_clients": AUTH_CLIENTS,
                    "auth_addresses": AUTH_ADDRESSES,
                    "auth_pause": AUTH_PAUSE,
                    "idle": fill - slow,
                    "slow": slow,
                    "overflow": OVERFLOW if cap else 0,
                    "stalled": STALLED,
                    "stalled_addresses": 8,
                    "churn": CHURN,
                    "churn_addresses": 6,
                    "malformed": MALFORMED,
                }
                proc = psutil.Process(exporter.pid)
                rss_start = proc.memory_info().rss / 2**20
                session = asyncio.run(_session(port, auth, proc, load_config, tmp))
                exporter.check_alive()
                after = client.text("/metrics")
            finally:
                client.close()

    quiet, abuse = session["quiet"], session["abuse"]
    hz, sc = abuse["healthz"]["p99_ms"], abuse["scrape"]["p99_ms"]
    figures = [
        c.figure(
            "/healthz p99 under abuse",
            hz,
            "ms",
            baseline_name="quiet p99",
            baseline=quiet["healthz"]["p99_ms"],
            goal=f"< {GOAL_HEALTHZ_MS:g} ms",
            meets_goal=hz < GOAL_HEALTHZ_MS,
        ),
        c.figure(
            "correct scraper /metrics p99 under abuse",
            sc,
            "ms",
            baseline_name="quiet p99",
            baseline=quiet["scrape"]["p99_ms"],
            goal=f"< {GOAL_SCRAPE_MS:g} ms",
            meets_goal=sc < GOAL_SCRAPE_MS,
        ),
        c.figure(
            "exporter RSS peak under abuse",
            abuse["rss_peak_mib"],
            "MiB",
            baseline_name="quiet peak",
            baseline=quiet["rss_peak_mib"],
            goal=f"< {GOAL_RSS_MIB:g} MiB",
            meets_goal=abuse["rss_peak_mib"] is not None and abuse["rss_peak_mib"] < GOAL_RSS_MIB,
        ),
    ]
    windows = []
    for label, w in (("quiet", quiet), ("abuse", abuse)):
        windows.append(
            {
                "window": label,
                "seconds": w["seconds"],
                "healthz probes": w["healthz"].get("scrapes"),
                "healthz p50 ms": w["healthz"].get("p50_ms"),
                "healthz p99 ms": w["healthz"].get("p99_ms"),
                "healthz failed": sum(w["healthz"]["failures"].values()),
                "scrapes": w["scrape"].get("scrapes"),
                "scrape p50 ms": w["scrape"].get("p50_ms"),
                "scrape p99 ms": w["scrape"].get("p99_ms"),
                "scrapes failed": sum(w["scrape"]["failures"].values()),
                "RSS peak MiB": w["rss_peak_mib"],
                "exporter CPU %": w["exporter_cpu_percent"],
                "load process CPU %": w.get("load_process_cpu_percent", 0.0),
            }
        )
    traffic_rows = []
    for kind, t in session["traffic"].items():
        traffic_rows.append(
            {
                "kind": kind,
                "clients": t["clients"],
                "requests": t["requests"],
                "statuses": ", ".join(f"{k}: {v}" for k, v in sorted(t["status"].items())) or "-",
                "connects": t["connects"],
                "closed by exporter": t["closed_by_server"],
                "errors": ", ".join(f"{k}: {v}" for k, v in sorted(t["errors"].items())) or "-",
            }
        )
    before_counters, after_counters = _counters(text), _counters(after)
    counter_rows = [
        {"series": name, "during the run": value - before_counters.get(name, 0.0) if "_total" in name else value}
        for name, value in after_counters.items()
        if value or before_counters.get(name)
    ]
    limit_flags = f" --web.max-connections {MAX_CONNECTIONS} --web.health-connections {HEALTH_CONNECTIONS}"
    notes += [
        f"Exporter: `python -m exporter serve` on replayed npu-smi and hccn_tool (benchmarks/_replay.py: the simulator's a3 answers, healthy, captured once) `--web.config.file WEB.yml "
        f"--ingest.token-file TOKEN{limit_flags if limits else ''}` "
        f"(network on, CANN_SIM_PROCESSES=4, {samples} samples); RSS {rss_start:.0f} MiB once complete.",
        f"Connection cap in force (cann_exporter_http_max_connections): {cap if cap is not None else 'n/a'}; held by the "
        f"abuse: {AUTH_CLIENTS} wrong-password + 1 ingest + {SCRAPERS} scrapers + {load_config['idle']} idle + "
        f"{load_config['slow']} never-reading, and {load_config['overflow']} idle beyond the cap; meanwhile "
        f"{STALLED} stalled 1 MiB bodies, {CHURN} churning clients and {MALFORMED} malformed-request clients.",
        f"Wrong passwords: {AUTH_CLIENTS} clients from {AUTH_ADDRESSES} loopback addresses, one attempt per "
        f"{AUTH_PAUSE:g} s each (at most {AUTH_CLIENTS / AUTH_PAUSE if AUTH_PAUSE else float('inf'):.0f} a second); "
        f"bcrypt cost {BCRYPT_COST}.",
        "Everything runs on the same cores: the load process, this client, the exporter and its replayed tools "
        "children (npu-smi every 10 s, hccn_tool every 30 s and 60 s).",
        "A failed or non-200 request counts in the percentiles as its timeout (probe 2 s, scrape 10 s).",
    ]
    if session.get("load_log"):
        notes.append(f"The load process exited with an error: {session['load_log']}")
    with tempfile.TemporaryDirectory(prefix="bench-abuse-45-") as tmp_name:
        one_address = _abuse_one_address.run(Path(tmp_name), notes)
    figures += one_address["figures"]
    with tempfile.TemporaryDirectory(prefix="bench-abuse-45-profiles-") as tmp_name:
        profiles = _abuse_profiles.run(Path(tmp_name), notes)
    figures += profiles["figures"]
    return {
        "title": f"/healthz, a correct scraper and RSS while flooded for {SECONDS:g} s",
        "section": "Under abuse",
        "summary": (
            f"Baseline: a quiet window of {QUIET_SECONDS:g} s just before, same exporter, same client. Goals under "
            f"abuse: /healthz p99 < {GOAL_HEALTHZ_MS:g} ms, correct scraper p99 < {GOAL_SCRAPE_MS:g} ms, "
            f"RSS < {GOAL_RSS_MIB:g} MiB. Issue 45's parts (one address against every budget) have their own baselines, "
            "measured just before each."
        ),
        "figures": c.rounded(figures),
        "tables": {
            "Quiet vs under abuse": c.rounded(windows),
            "Hostile traffic during the abuse window": traffic_rows,
            "The exporter's own counters (change over the run; gauges at the end)": c.rounded(counter_rows),
            **{name: c.rounded(rows) for name, rows in one_address["tables"].items()},
        },
        "raw": c.rounded(
            {
                "quiet": quiet,
                "abuse": abuse,
                "startup": startup,
                "load_config": {k: v for k, v in load_config.items() if k not in ("password", "ingest_token")},
                "issue_45": {**one_address["raw"], **profiles["raw"]},
            }
        ),
        "notes": notes,
        "command": ".venv/bin/python -m benchmarks exporter_abuse",
    }


if __name__ == "__main__":
    c.main(run)
