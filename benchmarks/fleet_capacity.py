"""Capacity planning at fleet scale: the capacity dashboard and `report` on a month of history
of 1,000 nodes x 8 chips, against the same questions asked of the raw series.

1. History: a synthetic fleet (benchmarks/_fleet_history.py: jobs, idle spells, growth,
   churn of process and pod series, node outages) at BENCH_FLEET_RESOLUTION (5 min). Raw
   samples cover the last BENCH_FLEET_RAW_DAYS (1) of it, written as OpenMetrics one TSDB block
   window at a time to a temporary directory and turned into blocks by `promtool tsdb
   create-blocks-from openmetrics` (each window's file deleted once converted). Before the raw
   window, the same simulated fleet is written as the report's hourly records only
   (benchmarks/_fleet_records.py: per chip-hour utilization, in use, seconds observed,
   namespace; per node-hour HBM and energy, its idle part and per namespace), as the rules
   would have recorded them, through the same promtool command. The raw samples include each
   chip's energy counter, so the report's energy reading is timed at the fleet's size.
2. Recording rules: the shipped capacity rules (`exporter/generate/recording.py`, as in
   alerts/cann-exporter.rules.yml) with the rollup interval at twice the resolution (the
   chip-hour rules count a chip observed through an interval only with a sample in it and in
   the one before: with 5-minute samples the interval must be 10 minutes; shipped, 1 minute
   for 30 s scrapes). `promtool tsdb create-blocks-from rules` evaluates them through a real
   Prometheus on the raw window (--eval-interval = the resolution for the group without its
   own interval, --start/--end = the raw window), in passes: a rule on other rules runs after
   their blocks are loaded (benchmarks/_raw_queries.py `levels`).
3. Serving: the Debian Prometheus on 127.0.0.1 on the blocks, after it has merged the
   overlapping blocks the backfill wrote (as it would after any backfill), with a query
   lookback of the rollup interval when that exceeds the default 5 minutes (a 10-minute
   rollup is otherwise invisible to instant selection half the time; shipped, 1-minute
   rollups need no change).
4. Timed, against the data's end: every target of the capacity dashboard found in grafana/
   (range targets over the dashboard's time range at the step the report uses for it, 1 h for
   30 days; instant ones at the end), each against its raw-series equivalent (every recorded
   series replaced by its rule on raw series, benchmarks/_raw_queries.py); a panel's time is
   the sum of its targets (sequential: what a single Prometheus core gives). Then
   `cann-exporter report --range 30d` (its queries through its own reader, on the hourly
   records, and its analysis), the same window read from the raw series (the report without
   the rules), and `diagnose --prometheus` (1 h), timed per query.
5. The report's analysis on a month at the fleet's full shape (benchmarks/_month_analysis.py:
   every chip with 720 hourly points, whatever the history was sized down to).
6. VictoriaMetrics (benchmarks/_victoria.py): the Debian single-node binary on 127.0.0.1, the
   same blocks imported with `vmctl prometheus`, then every dashboard target, the report and
   diagnose asked of it unchanged.

Goals: each panel <= 1 s and <= 0.1x its raw equivalent (10x faster); each report query
<= 10 s and the whole report (queries and analysis) <= 60 s; each diagnose query <= 2 s; the
same on VictoriaMetrics. Report and diagnose queries are timed up to 120 s each (a failed one
is noted and the reader goes on, so each query it sends is timed). Recorded: Prometheus' RSS
peak (VmHWM) while backfilling the rules, merging blocks, serving the panels and serving the
raw queries, VictoriaMetrics' while importing and serving, and the TSDB on disk. Evaluating
every rule on a month of raw samples took about 3 hours on 2 cores (the rule backfill, about
0.035 s per chip-day, and promtool reading 300 million raw samples); with one raw day and the
report's records before it, the default scale takes well under an hour (docs/scaling.md). The
dashboard's own records, and so its panels, then cover the raw window only.

    python -m benchmarks.fleet_capacity
        (env BENCH_FLEET_NODES 1000, BENCH_FLEET_CHIPS 8, BENCH_FLEET_DAYS 30,
         BENCH_FLEET_RESOLUTION 300 seconds, BENCH_FLEET_RAW_DAYS 1 (raw samples; the whole
         history when >= BENCH_FLEET_DAYS), BENCH_FLEET_RAW_TIMEOUT 30 seconds a raw query may
         take before it counts as "over", BENCH_FLEET_TMPDIR where the temporary history goes)
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks import _common as c
from benchmarks._fleet_history import (
    FleetHistory,
    FleetScale,
    block_seconds,
    retention_days,
)
from benchmarks._fleet_records import HourlyRecords
from benchmarks._month_analysis import time_month_analysis
from benchmarks._raw_queries import RawEquivalents, Rule, levels, rule_file, rules_of
from benchmarks._victoria import BINARIES, import_history, rss_peak, victoria
from exporter.diagnostics.capacity import analyse_capacity, choose_step
from exporter.diagnostics.capacity_reader import fit_window, read_capacity, unhealthy_states
from exporter.diagnostics.energy import analyse_energy
from exporter.diagnostics.energy_reader import read_energy
from exporter.diagnostics.model import CannotDiagnose
from exporter.diagnostics.prom_reader import Window, read_prometheus
from exporter.diagnostics.promapi import (
    PrometheusClient,
    PrometheusError,
    parse_duration,
)
from exporter.generate.recording import recording_rules
from exporter.thresholds.table import load_thresholds

SCALE = FleetScale(
    nodes=int(os.environ.get("BENCH_FLEET_NODES", "1000")),
    chips=int(os.environ.get("BENCH_FLEET_CHIPS", "8")),
    days=float(os.environ.get("BENCH_FLEET_DAYS", "30")),
    resolution=int(os.environ.get("BENCH_FLEET_RESOLUTION", "300")),
)
FULL = FleetScale()
RAW_TIMEOUT = float(os.environ.get("BENCH_FLEET_RAW_TIMEOUT", "30"))
RAW_DAYS = float(os.environ.get("BENCH_FLEET_RAW_DAYS", "1"))  # raw samples (and rules on them) for the last days; before: hourly records
TOOL_TIMEOUT = 120.0  # report and diagnose queries are timed up to 4x the report's own default timeout
TMPDIR = os.environ.get("BENCH_FLEET_TMPDIR") or None
REPEATS = 3  # timed runs of a query after one warm-up, median reported
REPEAT_BUDGET = 10.0  # seconds: a slower query is timed fewer times
WARM_UP = 1.0  # seconds: a first run slower than this counts (evaluation, not cold caches, dominates)
PANEL_SECONDS, PANEL_RATIO = 1.0, 0.1
REPORT_RANGE = 30 * 86400.0  # `report` default (exporter/commands/report.py)
REPORT_QUERY_GOAL, REPORT_GOAL = 10.0, 60.0  # seconds: each report query, the whole report (queries and analysis)
DIAGNOSE_RANGE, DIAGNOSE_QUERY_GOAL = 3600.0, 2.0  # `diagnose --prometheus` default range; seconds per query
DEFAULT_LOOKBACK = 300
MIB = 1 << 20


def run() -> dict[str, Any]:
    for name in ("prometheus", "promtool"):
        if not shutil.which(name):
            raise c.BenchError(f"{name} not found; install it: apt-get install -y prometheus")
    for name in BINARIES:
        if not shutil.which(name):
            raise c.BenchError(f"{name} not found; install it: apt-get install -y victoria-metrics util-linux")
    rollup = 2 * SCALE.resolution
    rules = rules_of(recording_rules(load_thresholds(), windows={"rollup_interval": f"{rollup}s"}), SCALE.resolution)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-", dir=TMPDIR) as tmp:
        work = Path(tmp)
        data = work / "data"
        history = FleetHistory(SCALE, int(time.time()), raw_days=RAW_DAYS if RAW_DAYS < SCALE.days else None, energy=True)
        server = Server(work, data, retention_days(SCALE.days))
        records = backfill_records(history, rollup, data, work)
        raw = backfill_history(history, data, work)
        recorded = backfill_rules(server, rules, history, work)
        merged = merge_blocks(server)
        lookback = max(DEFAULT_LOOKBACK, rollup)
        with server.running(lookback=lookback, name="serving") as prom:
            idle_rss = prom.rss()
            panels = time_panels(prom, RawEquivalents(rules), history.end)
            tools = time_tools(prom.url, history.end, raw=history.raw_start == history.start)
            counts = series_counts(prom.url, history.end)
            rss = {"idle": idle_rss, **panels.pop("rss"), "tools": prom.rss_peak()}
        victoria_metrics = time_victoria(work, data, lookback, history.end)
    tools["month_analysis"] = time_month_analysis(SCALE.nodes, SCALE.chips, float(history.end))
    return result(history, rollup, lookback, records, raw, recorded, merged, panels, tools, rss, counts, victoria_metrics)


# --- Prometheus -------------------------------------------------------------------------------------


@dataclass
class Running:
    url: str
    proc: c.Process

    def _status(self, key: str) -> int:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def rss(self) -> int:
        return self._status("VmRSS")

    def rss_peak(self) -> int:
        return self._status("VmHWM")

    def metric(self, name: str) -> float | None:
        _, body = post(self.url, "/metrics", None, 10.0, method="GET")
        return c.sample_value(body.decode(), name)


@dataclass
class Server:
    """The Debian Prometheus on ``data``, started afresh for each phase (its VmHWM is then the
    phase's peak)."""

    work: Path
    data: Path
    retention_days: int
    log: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def running(self, *, lookback: int = DEFAULT_LOOKBACK, name: str = "prometheus") -> Iterator[Running]:
        config = self.work / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1m\n")
        port = c.free_port()
        argv = [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data}",
            f"--web.listen-address={c.HOST}:{port}",
            f"--storage.tsdb.retention.time={self.retention_days}d",
            f"--query.lookback-delta={lookback}s",
            f"--query.timeout={int(TOOL_TIMEOUT)}s",
            "--log.level=warn",
        ]
        with c.started(name, argv) as proc:
            url = f"http://{c.HOST}:{port}"
            c.wait_until("Prometheus ready", lambda: post(url, "/-/ready", None, 2.0, method="GET")[0] == 200, 600, every=0.5, procs=[proc])
            running = Running(url, proc)
            try:
                yield running
            finally:
                tail = proc.log_tail(5)
                if tail.strip():
                    self.log.append(f"{name}: {tail}")


def post(url: str, path: str, params: Mapping[str, str] | None, timeout: float, method: str = "POST") -> tuple[int, bytes]:
    """(status, body) of one request on a new connection."""
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    try:
        body = urllib.parse.urlencode(params).encode() if params is not None else None
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def tsdb_bytes(data: Path) -> int:
    return sum(f.stat().st_size for f in data.rglob("*") if f.is_file())


def block_metas(data: Path) -> list[dict[str, Any]]:
    """The blocks' meta.json, without blocks being written or deleted (``ULID.tmp-for-...``)."""
    return [json.loads(m.read_text()) for m in data.glob("*/meta.json") if "." not in m.parent.name]


def merged_count(metas: Sequence[Mapping[str, Any]]) -> int:
    """Blocks left once every group of overlapping blocks is merged into one."""
    groups, reach = 0, None
    for meta in sorted(metas, key=lambda m: m["minTime"]):
        if reach is None or meta["minTime"] >= reach:
            groups += 1
            reach = meta["maxTime"]
        else:
            reach = max(reach, meta["maxTime"])
    return groups


def promtool(*args: str, timeout: float = 7200) -> float:
    start = time.monotonic()
    done = subprocess.run(["promtool", "tsdb", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise c.BenchError(f"promtool tsdb {' '.join(args[:2])} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return time.monotonic() - start


# --- backfill ---------------------------------------------------------------------------------------


def backfill_history(history: FleetHistory, data: Path, work: Path) -> dict[str, Any]:
    block = block_seconds(history.scale.days)
    text = work / "window.om"
    out: dict[str, Any] = {"windows": 0, "samples": 0, "text_bytes": 0, "generate_seconds": 0.0, "promtool_seconds": 0.0}
    for first, last in history.windows(block):
        start = time.monotonic()
        stats = history.write(text, first, last)
        out["generate_seconds"] += time.monotonic() - start
        out["promtool_seconds"] += promtool(
            "create-blocks-from", f"--max-block-duration={block}s", "openmetrics", "-q", str(text), str(data)
        )
        text.unlink()
        out["windows"] += 1
        out["samples"] += stats.samples
        out["text_bytes"] = max(out["text_bytes"], stats.bytes)
    out["series"] = history.series_count()
    out["block_hours"] = block / 3600
    out["disk_bytes"] = tsdb_bytes(data)
    return out


def backfill_records(history: FleetHistory, rollup: int, data: Path, work: Path) -> dict[str, Any]:
    """The report's hourly records before the raw window (benchmarks/_fleet_records.py), as
    OpenMetrics window by window, turned into blocks by promtool."""
    block = block_seconds(history.scale.days)
    text = work / "records.om"
    writer = HourlyRecords(history, rollup)
    out: dict[str, Any] = {"windows": 0, "samples": 0, "generate_seconds": 0.0, "promtool_seconds": 0.0}
    for first, last in history.record_windows(block):
        start = time.monotonic()
        stats = writer.write(text, first, last)
        out["generate_seconds"] += time.monotonic() - start
        if stats.samples:
            out["promtool_seconds"] += promtool(
                "create-blocks-from", f"--max-block-duration={block}s", "openmetrics", "-q", str(text), str(data)
            )
        text.unlink()
        out["windows"] += 1
        out["samples"] += stats.samples
    out["hours"] = (history.raw_start - history.start) / 3600
    return out


def backfill_rules(server: Server, rules: Sequence[Rule], history: FleetHistory, work: Path) -> dict[str, Any]:
    """Every rule evaluated over the history by promtool through Prometheus, pass by pass."""
    block = block_seconds(history.scale.days)
    rule_path, out_dir = work / "rules.yml", work / "rule-blocks"
    passes = []
    for number, batch in enumerate(levels(rules), 1):
        rule_path.write_text(yaml.safe_dump(rule_file(batch, history.scale.resolution), sort_keys=False))
        with server.running(name=f"rules-pass-{number}") as prom:
            seconds = promtool(
                "create-blocks-from",
                f"--max-block-duration={block}s",
                "rules",
                "-q",
                f"--url={prom.url}",
                f"--start={history.raw_start}",
                f"--end={history.end}",
                f"--eval-interval={history.scale.resolution}s",
                f"--output-dir={out_dir}",
                str(rule_path),
            )
            peak = prom.rss_peak()
        blocks = [d for d in out_dir.iterdir() if (d / "meta.json").exists()] if out_dir.exists() else []
        size = sum(tsdb_bytes(d) for d in blocks)
        for d in blocks:
            d.rename(server.data / d.name)
        passes.append(
            {
                "pass": number,
                "rules": len(batch),
                "seconds": seconds,
                "blocks": len(blocks),
                "disk_bytes": size,
                "prometheus_rss_peak_bytes": peak,
            }
        )
    return {
        "passes": passes,
        "rules": len(rules),
        "seconds": sum(p["seconds"] for p in passes),
        "disk_bytes": sum(p["disk_bytes"] for p in passes),
        "rss_peak_bytes": max((p["prometheus_rss_peak_bytes"] for p in passes), default=0),
    }


def merge_blocks(server: Server) -> dict[str, Any]:
    """Prometheus merging the overlapping blocks the backfill wrote (it starts a minute after
    it opens them), waited for until no two blocks on disk overlap and Prometheus has loaded
    each (a merged group may come out as several blocks, cut at its block ranges)."""
    metas = block_metas(server.data)
    groups = merged_count(metas)
    after: list[int] = []

    def merged(prom: Running) -> bool:
        try:
            now = block_metas(server.data)
        except (OSError, ValueError):  # a block renamed or deleted while read: look again
            return False
        after[:] = [len(now)]
        return merged_count(now) == len(now) == prom.metric("prometheus_tsdb_blocks_loaded")

    with server.running(name="merging") as prom:
        start = time.monotonic()
        c.wait_until(
            f"Prometheus to merge {len(metas)} blocks ({groups} groups of overlapping ones)",
            lambda: merged(prom),
            600 + 120 * groups,
            every=2.0,
            procs=[prom.proc],
        )
        seconds = time.monotonic() - start
        peak = prom.rss_peak()
    return {
        "blocks_before": len(metas),
        "blocks_after": after[0] if after else groups,
        "seconds": seconds,
        "rss_peak_bytes": peak,
        "disk_bytes": tsdb_bytes(server.data),
    }


# --- the capacity dashboard -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    panel: str
    ref: str
    expr: str
    instant: bool


def capacity_dashboard() -> tuple[str, float, list[Target]]:
    """(title, range seconds, targets) of the generated capacity dashboard in grafana/."""
    for path in sorted((c.REPO / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        if "capacity" in f"{board.get('uid', '')} {board.get('title', '')}".lower():
            break
    else:
        raise c.BenchError("no capacity dashboard in grafana/dashboards (uid or title naming capacity)")
    seconds = parse_duration(board.get("time", {}).get("from", "now-30d").removeprefix("now-"))
    targets = []

    def walk(panels: Sequence[Mapping[str, Any]]) -> None:
        for panel in panels:
            walk(panel.get("panels") or [])
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    targets.append(
                        Target(
                            panel.get("title", "?"),
                            target.get("refId", "?"),
                            target["expr"],
                            bool(target.get("instant")) and not target.get("range"),
                        )
                    )

    walk(board.get("panels") or [])
    return board.get("title", path.stem), seconds, targets


def substitute(expr: str, step: float) -> str:
    """Grafana's variables: intervals from the step, one inside a label matcher's quotes an "All"
    selection, any other (a constant such as a price per kWh) the number 1."""
    intervals = {"__interval": step, "__rate_interval": 4 * step, "__range": None}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in intervals:
            return f"{int(intervals[name] or step)}s"
        return ".*" if expr.count('"', 0, match.start()) % 2 else "1"

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", value, expr)


@dataclass
class Timing:
    seconds: float | None = None  # median of the timed runs
    runs: int = 0
    error: str = ""
    body: bytes = b""


def time_query(url: str, query: str, params: Mapping[str, str], timeout: float) -> Timing:
    """One warm-up (counted when slower than WARM_UP), then up to REPEATS timed runs within
    REPEAT_BUDGET; a run that fails or exceeds ``timeout`` ends it (its time is then reported
    as ``timeout``)."""
    endpoint = "/api/v1/query_range" if "step" in params else "/api/v1/query"
    times: list[float] = []
    spent, last = 0.0, Timing()
    for attempt in range(REPEATS + 1):
        start = time.perf_counter()
        try:
            status, body = post(url, endpoint, {**params, "query": query, "timeout": f"{int(timeout)}s"}, timeout + 30)
        except (OSError, http.client.HTTPException) as exc:
            status, body = 0, str(exc).encode()
        elapsed = time.perf_counter() - start
        spent += elapsed
        if status != 200:
            detail = _error_text(body)
            return Timing(max(elapsed, timeout) if _timed_out(detail) else None, len(times) + 1, detail or f"HTTP {status}")
        last = Timing(body=body)
        if attempt or elapsed > WARM_UP:
            times.append(elapsed)
        if spent > REPEAT_BUDGET and times:
            break
    last.seconds, last.runs = statistics.median(times), len(times)
    return last


def _timed_out(error: str) -> bool:
    return "timeout" in error or "timed out" in error


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
        return f"{doc.get('errorType', '')}: {doc.get('error', '')}"
    except ValueError:
        return body.decode(errors="replace")[:200]


def agreement(recorded: bytes, raw: bytes) -> dict[str, Any]:
    """How close the recorded answer is to the raw one: series found in each and in both, and
    how far apart the totals of their values at the same times are (relative to the raw
    total; single points differ where a job starts or stops between the rule's evaluation
    times and the raw query's)."""
    a, b = _points(recorded), _points(raw)
    pairs = [(x, y) for key in set(a) & set(b) for t, x in a[key].items() if (y := b[key].get(t)) is not None]
    total_a, total_b = sum(x for x, _ in pairs), sum(y for _, y in pairs)
    return {
        "series_recorded": len(a),
        "series_raw": len(b),
        "series_both": len(set(a) & set(b)),
        "points": len(pairs),
        "total_rel_diff": abs(total_a - total_b) / max(abs(total_b), 1e-9) if pairs else None,
    }


def _points(body: bytes) -> dict[tuple[tuple[str, str], ...], dict[float, float]]:
    data = json.loads(body)["data"]
    out: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    result = data["result"] if data["resultType"] in ("matrix", "vector") else [{"metric": {}, "value": data["result"]}]
    for item in result:
        key = tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__"))
        values = item.get("values") or [item["value"]]
        out[key] = {float(t): float(v) for t, v in values if v not in ("NaN", "+Inf", "-Inf")}
    return out


def panel_window(seconds: float, end: int) -> tuple[float, dict[str, str]]:
    """(step, range parameters) of the dashboard's range targets, as Grafana sends them."""
    step = max(choose_step(seconds), SCALE.resolution)
    last = end - end % step  # Grafana aligns a range to its step
    return step, {"start": str(last - seconds), "end": str(last), "step": f"{int(step)}s"}


def time_victoria(work: Path, data: Path, lookback: int, end: int) -> dict[str, Any]:
    """The same history in VictoriaMetrics (benchmarks/_victoria.py): every dashboard target
    on its recorded series, then `report` and `diagnose`, unchanged, through their readers."""
    with victoria(work, lookback, TOOL_TIMEOUT) as (url, proc):
        imported = import_history(url, data)
        _, seconds, targets = capacity_dashboard()
        step, window = panel_window(seconds, end)
        rows = []
        for target in targets:
            timing = time_query(url, substitute(target.expr, step), {"time": str(end)} if target.instant else window, RAW_TIMEOUT)
            rows.append({"panel": target.panel, "target": target.ref, "seconds": timing.seconds, "error": timing.error})
        tools = time_tools(url, end, raw=False)
        return {"import": imported, "panels": rows, "tools": tools, "rss_peak_bytes": rss_peak(proc)}


def time_panels(prom: Running, raw: RawEquivalents, end: int) -> dict[str, Any]:
    title, seconds, targets = capacity_dashboard()
    step, window = panel_window(seconds, end)
    rows = []
    for target in targets:
        query = substitute(target.expr, step)
        params = {"time": str(end)} if target.instant else window
        rows.append(
            {
                "target": target,
                "query": query,
                "params": params,
                "raw_query": raw.expand(query),
                "recorded": time_query(prom.url, query, params, RAW_TIMEOUT),
            }
        )
    rss_recorded = prom.rss_peak()
    for row in rows:
        row["raw"] = time_query(prom.url, row["raw_query"], row["params"], RAW_TIMEOUT)
        if row["recorded"].body and row["raw"].body:
            row["agreement"] = agreement(row["recorded"].body, row["raw"].body)
        row["recorded"].body = row["raw"].body = b""
    return {"title": title, "range_seconds": seconds, "step": step, "rows": rows, "rss": {"recorded": rss_recorded, "raw": prom.rss_peak()}}


# --- report and diagnose ----------------------------------------------------------------------------


@dataclass
class TimedClient(PrometheusClient):
    """The reader's own client, timing each call (the reader parses the JSON: included). A
    failed call is recorded and answers "no series", so the reader goes on to its next query
    and every query it sends is timed."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def _call(self, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
        start = time.perf_counter()
        try:
            data = super()._call(endpoint, params)
            error = ""
        except PrometheusError as exc:
            data, error = {"resultType": "vector" if endpoint == "query" else "matrix", "result": []}, str(exc)[:300]
        result = data.get("result")
        self.calls.append(
            {
                "endpoint": endpoint,
                "query": params.get("query", ""),
                "seconds": time.perf_counter() - start,
                "series": len(result) if isinstance(result, list) else 1,
                "error": error,
            }
        )
        return data


def time_tools(url: str, end: int, raw: bool = True) -> dict[str, Any]:
    """`report --range 30d` as commands/report.py runs it (reading and analysis, energy's too,
    charts left out),
    then the same window read from the raw series (the report without recording rules), then
    `diagnose --prometheus`."""
    out: dict[str, Any] = {}
    report = TimedClient(url, timeout=TOOL_TIMEOUT)
    table = load_thresholds()
    start = time.perf_counter()
    window = None
    try:
        window = fit_window(report, float(end), REPORT_RANGE, None, "")
        data = read_capacity(
            report,
            window.first,
            window.last,
            window.step,
            "",
            None,
            window.requested,
            unhealthy_states(table),
            recorded=window.recorded,
            nodes=dict(window.nodes),
        )
        joules = read_energy(report, window.first, window.last, window.step, "", window.recorded)
        out["report_chips"], out["report_recorded"], out["report_step"] = len(data.chips), window.recorded, window.step
        analysed = time.perf_counter()
        summary = analyse_capacity(data, table, 30.0)
        analyse_energy(joules, data, summary.bounds.low)
        out["report_analysis_seconds"] = time.perf_counter() - analysed
        out["report_chip_hours"] = summary.totals.get("chip_hours")
    except (CannotDiagnose, PrometheusError) as exc:
        out["report_error"] = str(exc)[:300]
    out["report_seconds"] = time.perf_counter() - start
    out["report"] = report.calls
    if raw and window is not None and window.recorded:
        raw_client = TimedClient(url, timeout=RAW_TIMEOUT)
        start = time.perf_counter()
        try:
            data = read_capacity(raw_client, window.first, window.last, window.step, "", None, window.requested, unhealthy_states(table))
            out["raw_report_chip_hours"] = analyse_capacity(data, table, 30.0).totals.get("chip_hours")
        except CannotDiagnose as exc:
            out["raw_report_error"] = str(exc)[:300]
        out["raw_report_seconds"] = time.perf_counter() - start
        out["raw report"] = raw_client.calls
    diagnose = TimedClient(url, timeout=TOOL_TIMEOUT)
    start = time.perf_counter()
    try:
        observations = read_prometheus(diagnose, Window(float(end), DIAGNOSE_RANGE), "", table)
        out["diagnose_chips"] = len(observations.chips)
    except CannotDiagnose as exc:
        out["diagnose_error"] = str(exc)[:300]
    out["diagnose_seconds"] = time.perf_counter() - start
    out["diagnose"] = diagnose.calls
    return out


def series_counts(url: str, end: int) -> dict[str, Any]:
    out = {}
    for name, query in (("raw", 'count({__name__=~"[^:]+"})'), ("recorded", 'count({__name__=~".+:.+"})')):
        status, body = post(url, "/api/v1/query", {"query": query, "time": str(end)}, 120)
        result = json.loads(body)["data"]["result"] if status == 200 else []
        out[f"{name}_series_at_end"] = int(float(result[0]["value"][1])) if result else None
    return out


# --- the result -------------------------------------------------------------------------------------


def _version(package: str) -> str:
    """The Debian package's version (the binary prints none)."""
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=30, check=False)
    return done.stdout.strip() or "?"


def victoria_figures(panels: Mapping[str, Any], tools: Mapping[str, Any], vm: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dashboard, report and diagnose on VictoriaMetrics, each beside Prometheus' time."""
    on_vm, here = vm["tools"], sum(r["recorded"].seconds or 0.0 for r in panels["rows"])
    panel_errors = [r for r in vm["panels"] if r["error"]]
    out = [
        c.figure(
            f"VictoriaMetrics: every capacity-dashboard target ({len(vm['panels'])}), summed",
            None if panel_errors else sum(r["seconds"] or 0.0 for r in vm["panels"]),
            "s",
            baseline_name="Prometheus",
            baseline=here,
        )
    ]
    for tool, limit, key in (("report", REPORT_QUERY_GOAL, "report"), ("diagnose", DIAGNOSE_QUERY_GOAL, "diagnose")):
        slowest = max((call["seconds"] for call in on_vm.get(key) or []), default=None)
        out.append(
            c.figure(
                f"VictoriaMetrics: {tool}, slowest query",
                slowest,
                "s",
                baseline_name="Prometheus",
                baseline=max((call["seconds"] for call in tools.get(key) or []), default=None),
                goal=f"<= {limit:g} s",
                meets_goal=slowest is not None and slowest <= limit and not any(call["error"] for call in on_vm.get(key) or []),
            )
        )
    out.append(
        c.figure(
            "VictoriaMetrics: report, whole (queries and analysis)",
            on_vm.get("report_seconds"),
            "s",
            baseline_name="Prometheus",
            baseline=tools.get("report_seconds"),
            goal=f"<= {REPORT_GOAL:g} s",
            meets_goal=not on_vm.get("report_error") and (on_vm.get("report_seconds") or 1e9) <= REPORT_GOAL,
        )
    )
    out.append(c.figure("VictoriaMetrics RSS peak (import and queries)", vm["rss_peak_bytes"] / MIB, "MiB"))
    return out


def victoria_rows(panels: Mapping[str, Any], tools: Mapping[str, Any], vm: Mapping[str, Any]) -> list[dict[str, Any]]:
    here = {(r["target"].panel, r["target"].ref): r["recorded"].seconds for r in panels["rows"]}
    rows = [
        {
            "what": f"panel {r['panel']} {r['target']}",
            "victoria_s": r["seconds"],
            "prometheus_s": here.get((r["panel"], r["target"])),
            "error": r["error"],
        }
        for r in vm["panels"]
    ]
    for tool in ("report", "diagnose"):
        mine: dict[str, float] = {}
        for call in tools.get(tool) or []:
            mine.setdefault(call["query"], call["seconds"])
        for call in vm["tools"].get(tool) or []:
            rows.append(
                {
                    "what": f"{tool}: {call['query']}",
                    "victoria_s": call["seconds"],
                    "prometheus_s": mine.get(call["query"]),
                    "error": call["error"],
                }
            )
    return rows


def _panels(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    panels: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        panels.setdefault(row["target"].panel, []).append(row)
    return panels


def _sum(timings: Sequence[Timing]) -> float | None:
    return None if any(t.seconds is None for t in timings) else sum(t.seconds or 0.0 for t in timings)


def result(
    history: FleetHistory,
    rollup: int,
    lookback: int,
    records: Mapping[str, Any],
    raw: Mapping[str, Any],
    recorded: Mapping[str, Any],
    merged: Mapping[str, Any],
    panels: Mapping[str, Any],
    tools: Mapping[str, Any],
    rss: Mapping[str, int],
    counts: Mapping[str, Any],
    vm: Mapping[str, Any],
) -> dict[str, Any]:
    scale = history.scale
    figures = []
    for name, rows in _panels(panels["rows"]).items():
        fast = _sum([r["recorded"] for r in rows])
        refused = [r["raw"].error for r in rows if r["raw"].error and not _timed_out(r["raw"].error)]
        slow = None if refused else _sum([r["raw"] for r in rows])
        ratio = fast / slow if fast is not None and slow else None
        suffix = (
            f" (raw refused: {refused[0].split(':')[0]})"
            if refused
            else " (raw stopped at its limit: ratio at most)"
            if any(r["raw"].error for r in rows)
            else ""
        )
        figures.append(
            c.figure(
                f"panel: {name}{suffix}",
                fast,
                "s",
                baseline_name="raw series",
                baseline=slow,
                ratio_value=ratio,
                goal=f"<= {PANEL_SECONDS:g} s and <= {PANEL_RATIO:g}x raw",
                meets_goal=fast is not None and fast <= PANEL_SECONDS and (bool(refused) or (ratio is not None and ratio <= PANEL_RATIO)),
            )
        )
    raw_calls = tools.get("raw report") or []
    for tool, limit in (("report", REPORT_QUERY_GOAL), ("diagnose", DIAGNOSE_QUERY_GOAL)):
        calls = tools.get(tool) or []
        slowest = max((call["seconds"] for call in calls), default=None)
        raw_slowest = max((call["seconds"] for call in raw_calls), default=None) if tool == "report" and raw_calls else None
        figures.append(
            c.figure(
                f"{tool}: slowest of its {len(calls)} queries",
                slowest,
                "s",
                baseline_name="the same window from raw series" if raw_slowest is not None else "",
                baseline=raw_slowest,
                goal=f"<= {limit:g} s",
                meets_goal=slowest is not None
                and slowest <= limit
                and not tools.get(f"{tool}_error")
                and not any(call["error"] for call in calls),
            )
        )
    figures.append(
        c.figure(
            "report: whole (queries and analysis)",
            tools.get("report_seconds"),
            "s",
            baseline_name="the same window from raw series (queries only)" if raw_calls else "",
            baseline=tools.get("raw_report_seconds"),
            goal=f"<= {REPORT_GOAL:g} s",
            meets_goal=not tools.get("report_error") and (tools.get("report_seconds") or 1e9) <= REPORT_GOAL,
        )
    )
    month = tools["month_analysis"]
    queries_only = (tools.get("report_seconds") or 0.0) - (tools.get("report_analysis_seconds") or 0.0)
    figures.append(
        c.figure(
            f"report: analysis of a month at full shape ({month['chips']:,} chips x {month['points_per_chip']} hourly points)",
            month["seconds"],
            "s",
            goal=f"queries + analysis <= {REPORT_GOAL:g} s",
            meets_goal=queries_only + month["seconds"] <= REPORT_GOAL,
            note=f"queries of this run {queries_only:.1f} s",
        )
    )
    figures += victoria_figures(panels, tools, vm)
    figures += [
        c.figure(
            "Prometheus RSS peak: the panels",
            rss["recorded"] / MIB,
            "MiB",
            baseline_name="with the raw equivalents too",
            baseline=rss["raw"] / MIB,
        ),
        c.figure("Prometheus RSS peak: backfilling the rules", recorded["rss_peak_bytes"] / MIB, "MiB"),
        c.figure("Prometheus RSS peak: merging the backfilled blocks", merged["rss_peak_bytes"] / MIB, "MiB"),
        c.figure("TSDB on disk", merged["disk_bytes"] / MIB, "MiB", baseline_name="raw series only", baseline=raw["disk_bytes"] / MIB),
    ]
    sized_down = scale != FULL
    target_rows = [
        {
            "panel": r["target"].panel,
            "target": r["target"].ref,
            "query": r["query"],
            "kind": "instant" if r["target"].instant else "range",
            "recorded_s": r["recorded"].seconds,
            "raw_s": r["raw"].seconds,
            "ratio": (r["recorded"].seconds / r["raw"].seconds) if r["recorded"].seconds and r["raw"].seconds else None,
            "raw_error": r["raw"].error or r["recorded"].error,
            "total_rel_diff": (r.get("agreement") or {}).get("total_rel_diff"),
            "series_recorded_raw": "{series_recorded}/{series_raw}".format(**r["agreement"]) if r.get("agreement") else "",
        }
        for r in panels["rows"]
    ]
    tool_rows: dict[tuple[str, str], dict[str, Any]] = {}
    for tool in ("report", "raw report", "diagnose"):
        for call in tools.get(tool) or []:
            row = tool_rows.setdefault(
                (tool, call["query"]),
                {
                    "tool": tool,
                    "query": call["query"],
                    "endpoint": call["endpoint"],
                    "calls": 0,
                    "total_s": 0.0,
                    "max_s": 0.0,
                    "series": 0,
                    "error": "",
                },
            )
            row["calls"] += 1
            row["total_s"] += call["seconds"]
            row["max_s"] = max(row["max_s"], call["seconds"])
            row["series"] = max(row["series"], call["series"])
            row["error"] = row["error"] or call["error"]
    phases = [
        {
            "phase": f"hourly records before the raw window: generate OpenMetrics ({records['hours']:g} h)",
            "seconds": records["generate_seconds"],
        },
        {
            "phase": f"hourly records: promtool create-blocks-from openmetrics ({records['windows']} windows)",
            "seconds": records["promtool_seconds"],
        },
        {"phase": "history: generate OpenMetrics (Python)", "seconds": raw["generate_seconds"]},
        {"phase": f"history: promtool create-blocks-from openmetrics ({raw['windows']} windows)", "seconds": raw["promtool_seconds"]},
        *(
            {
                "phase": f"rules pass {p['pass']}: {p['rules']} rules, promtool create-blocks-from rules",
                "seconds": p["seconds"],
                "blocks": p["blocks"],
                "disk_MiB": p["disk_bytes"] / MIB,
                "rss_peak_MiB": p["prometheus_rss_peak_bytes"] / MIB,
            }
            for p in recorded["passes"]
        ),
        {
            "phase": f"Prometheus merging {merged['blocks_before']} blocks into {merged['blocks_after']}",
            "seconds": merged["seconds"],
            "rss_peak_MiB": merged["rss_peak_bytes"] / MIB,
        },
        {"phase": "report --range 30d: its queries and analysis", "seconds": tools.get("report_seconds")},
        *(
            [{"phase": "the same window from raw series (queries)", "seconds": tools.get("raw_report_seconds")}]
            if "raw report" in tools
            else []
        ),
        {"phase": "diagnose --prometheus: read 1 hour", "seconds": tools.get("diagnose_seconds")},
    ]
    notes = [
        f"Scale: {scale.describe()}" + (f"; sized down from {FULL.describe()} (BENCH_FLEET_* set)" if sized_down else "") + ".",
        (
            f"Raw and recorded: raw samples for the last {(history.end - history.raw_start + scale.resolution) / 86400:g} days "
            f"(BENCH_FLEET_RAW_DAYS), every recording rule backfilled on them; before that, {records['hours']:g} hours of "
            f"the report's hourly records only ({records['samples']:,} samples, benchmarks/_fleet_records.py), computed "
            "from the same simulated fleet. The report's 30 days read records throughout; the dashboard's records and "
            "the raw series (panels' raw equivalents, diagnose) hold the raw window only, and the report is not re-read "
            "from raw series."
            if history.raw_start > history.start
            else "Raw samples for the whole history, every recording rule backfilled on them."
        ),
        f"History: {raw['samples']:,} samples in {raw['series']:,} series ({counts.get('raw_series_at_end')} raw series "
        f"live at the end, {counts.get('recorded_series_at_end')} recorded); largest window of OpenMetrics text "
        f"{raw['text_bytes'] / MIB:,.0f} MiB; {raw['block_hours']:g} h blocks, retention {retention_days(scale.days)} d.",
        f"Rules: {recorded['rules']} recording rules in {len(recorded['passes'])} backfill passes, rollup interval "
        f"{rollup // 60} min (twice the resolution; shipped 1 min), the 5-minute group at --eval-interval "
        f"{scale.resolution // 60} min; serving with --query.lookback-delta {lookback // 60} min.",
        f"Dashboard {panels['title']!r}: {len(panels['rows'])} targets in {len(_panels(panels['rows']))} panels, range "
        f"targets over {panels['range_seconds'] / 86400:g} days at a {panels['step'] / 60:g} min step; a panel's time "
        f"is the sum of its targets' medians ({REPEATS} runs after a warm-up, fewer past {REPEAT_BUDGET:g} s).",
        f"A raw query stopped after {RAW_TIMEOUT:g} s counts as {RAW_TIMEOUT:g} s (the ratio is then an upper bound); "
        "one Prometheus refuses (e.g. past --query.max-samples) has no time: the panel then needs only its own "
        "<= 1 s.",
        f"Report: {len(tools.get('report') or [])} queries and analysis ({tools.get('report_seconds', 0):.1f} s, of which analysis "
        f"{tools.get('report_analysis_seconds', 0):.1f} s) for {tools.get('report_chips', 0)} chips at a "
        f"{(tools.get('report_step') or 0) / 60:g} min step, "
        + ("from the hourly recording rules" if tools.get("report_recorded") else "from raw series (no records held)")
        + f"; chip-hours {tools.get('report_chip_hours') or 0:,.1f}"
        + (
            f" (raw series: {tools.get('raw_report_chip_hours') or 0:,.1f}). The same window from raw series: "
            f"{len(tools.get('raw report') or [])} queries ({tools.get('raw_report_seconds', 0):.1f} s, each up to {RAW_TIMEOUT:g} s)."
            if "raw report" in tools
            else " (not re-read from raw series: they hold the raw window only)."
        )
        + f" diagnose: {len(tools.get('diagnose') or [])} queries ({tools.get('diagnose_seconds', 0):.1f} s).",
        f"VictoriaMetrics {_version('victoria-metrics')} (Debian): the same blocks imported by vmctl prometheus in "
        f"{vm['import']['seconds']:.0f} s ({vm['import']['samples']:,} samples; {vm['import']['series']:,} series counted per block), queried with "
        "its cache off; the report there: "
        + (
            f"{vm['tools'].get('report_chips')} chips, chip-hours {vm['tools'].get('report_chip_hours')}."
            if not vm["tools"].get("report_error")
            else f"failed: {vm['tools']['report_error']}"
        ),
        f"Prometheus RSS idle after start {rss['idle'] / MIB:,.0f} MiB; peak after the report and diagnose {rss['tools'] / MIB:,.0f} MiB.",
        *(f"{tool} failed: {tools[tool + '_error']}" for tool in ("report", "raw_report", "diagnose") if tools.get(tool + "_error")),
        *(f"{tool}: {call['error']}" for tool in ("report", "raw report", "diagnose") for call in tools.get(tool) or [] if call["error"]),
    ]
    return {
        "title": f"Capacity dashboard and report at fleet scale ({scale.nodes:,} nodes x {scale.chips} chips, {scale.days:g} days)",
        "summary": "Each capacity-dashboard panel on the recorded series against the same question asked of the raw "
        "series, on a real Prometheus holding the backfilled history; ratio = recorded / raw time, same "
        "run, same server.",
        "figures": c.rounded(figures),
        "tables": {
            "phases": c.rounded(phases),
            "panel targets": c.rounded(target_rows),
            "report and diagnose queries": c.rounded(list(tool_rows.values())),
            "VictoriaMetrics: every query, against Prometheus": c.rounded(victoria_rows(panels, tools, vm)),
        },
        "notes": notes,
        "raw": c.rounded(
            {
                "scale": scale.__dict__,
                "history": raw,
                "rules": recorded,
                "merge": merged,
                "rss_bytes": rss,
                "series": counts,
                "victoria_metrics": {"import": vm["import"], "rss_peak_bytes": vm["rss_peak_bytes"]},
            }
        ),
        "command": ".venv/bin/python -m benchmarks fleet_capacity",
    }


if __name__ == "__main__":
    c.main(run)
