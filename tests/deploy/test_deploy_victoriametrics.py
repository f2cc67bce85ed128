"""deploy/prometheus/victoriametrics.prometheus.yml for real: a Prometheus with the shipped
config (only its addresses, scrape and evaluation intervals and rule path made local)
scrapes two simulated nodes (one degraded: a Critical chip, one missing), evaluates the generated rules (windows shortened as in
tests/generate/test_e2e_prometheus.py) and remote-writes to the Debian VictoriaMetrics on
127.0.0.1. Then `report`'s queries (raw and recorded) and every capacity-dashboard target
are asked of both, unchanged, at the same instant: the same series, the same values within a
tolerance (the two evaluate a selector's lookback and a range's edges slightly differently).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.fleet_capacity import capacity_dashboard, substitute
from exporter.diagnostics.capacity_queries import raw_queries, recorded_queries
from exporter.diagnostics.capacity_reader import read_capacity
from exporter.diagnostics.promapi import PrometheusClient
from exporter.generate.writer import render
from exporter.thresholds.table import load_thresholds
from tests.support.deploy import DEPLOY
from tests.support.ports import free_port
from tests.support.tools import tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

CONFIG = DEPLOY / "prometheus" / "victoriametrics.prometheus.yml"
WINDOWS = {"window": "5s", "range": "10s", "rollup_interval": "1s"}
STATES = ("Alarm", "Critical")
SETTLE = 20.0  # seconds before now that both stores hold every sample of (remote_write batches within 5 s)
HELD = 30.0  # seconds of data before that instant


@dataclass(frozen=True)
class Stack:
    prometheus: str
    victoria: str
    tmp: Path


def _get(url: str, timeout: float = 10.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        doc: dict[str, Any] = json.loads(response.read())
    return doc


def _instant(base: str, query: str, at: float) -> dict[tuple[tuple[str, str], ...], float]:
    doc = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"}))
    assert doc["status"] == "success", (base, query, doc)
    data = doc["data"]
    items = data["result"] if data["resultType"] == "vector" else [{"metric": {}, "value": data["result"]}]
    return {
        tuple(sorted((k, v) for k, v in item["metric"].items() if k not in ("__name__", "cluster"))): float(item["value"][1])
        for item in items
    }


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def _wait(what: str, check: Any, seconds: float, procs: list[subprocess.Popen[bytes]]) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert all(p.poll() is None for p in procs), f"a process exited while waiting for {what}"
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {seconds:g}s")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("victoriametrics")
    (tmp / "alerts").mkdir()
    for name, text in render(load_thresholds(), windows=WINDOWS).items():
        if name.startswith("alerts/") and name.endswith(".yml"):
            (tmp / name).write_text(text)
    fast = ["--npu-smi.interval", "1s", "--npu-smi.detail-interval", "2s", "--max-age", "8s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports = {}
        for scenario in ("degraded", "underutilized"):
            ports[scenario] = free_port()
            with (tmp / f"exporter-{scenario}.log").open("w") as out:
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "exporter",
                            "serve",
                            "--simulate",
                            scenario,
                            "--listen",
                            f"127.0.0.1:{ports[scenario]}",
                            *fast,
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        vm_port = free_port()
        procs.append(
            _start(
                [
                    tool("victoria-metrics"),
                    f"-httpListenAddr=127.0.0.1:{vm_port}",
                    f"-storageDataPath={tmp / 'vm'}",
                    "-retentionPeriod=1",
                    "-search.latencyOffset=1s",
                    "-search.disableCache",
                    "-loggerLevel=ERROR",
                ],
                tmp / "victoria-metrics.log",
            )
        )
        victoria = f"http://127.0.0.1:{vm_port}"
        config = yaml.safe_load(CONFIG.read_text())
        config["global"].update({"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"})
        config["rule_files"] = [str(tmp / "alerts" / "*.yml")]
        (job,) = config["scrape_configs"]
        del job["file_sd_configs"]
        job["static_configs"] = [{"targets": [f"127.0.0.1:{p}" for p in ports.values()]}]
        (target,) = config["remote_write"]
        target["url"] = f"{victoria}/api/v1/write"
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_port = free_port()
        procs.append(
            _start(
                [
                    tool("prometheus"),
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'prom'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                tmp / "prometheus.log",
            )
        )
        prometheus = f"http://127.0.0.1:{prom_port}"
        _wait("VictoriaMetrics ready", lambda: urllib.request.urlopen(f"{victoria}/health", timeout=2).status == 200, 60, procs)
        # both nodes' chips and the hourly records in VictoriaMetrics, HELD seconds before the instant the tests read
        _wait(
            "remote-written records in VictoriaMetrics",
            lambda: (
                len(_instant(victoria, "chip:npu_aicore_utilization_ratio:avg1h", time.time() - SETTLE - HELD)) >= 15
                and len(_instant(victoria, "chip:npu_observed_seconds:sum1h", time.time() - SETTLE - HELD)) >= 15
            ),
            180,
            procs,
        )
        yield Stack(prometheus, victoria, tmp)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def test_the_shipped_remote_write_reaches_victoriametrics(stack: Stack) -> None:
    at = time.time() - SETTLE
    assert _instant(stack.victoria, "count(npu_up)", at) == {(): 15.0}, "8 chips and the degraded node's 7"
    assert _instant(stack.victoria, "count(npu_process_memory_bytes)", at) == {}, "write_relabel_configs drops per-process series"
    assert _instant(stack.prometheus, "count(npu_process_memory_bytes)", at), "the cluster Prometheus keeps them"
    labels = _get(f"{stack.victoria}/api/v1/label/cluster/values")["data"]
    assert labels == ["npu-cluster-a"], "external_labels travel with the samples"


def _report_queries() -> dict[str, str]:
    raw, recorded = raw_queries("", 60.0, STATES), recorded_queries("", 3600.0)
    out = {}
    for prefix, queries in (("raw", raw), ("recorded", recorded)):
        out.update({f"{prefix} util": queries.util, f"{prefix} namespaces": queries.namespaces, f"{prefix} unhealthy": queries.unhealthy})
        out.update({f"{prefix} hbm used": queries.hbm_used, f"{prefix} hbm total": queries.hbm_total})
        out.update({f"{prefix} in use {what}": query for what, query in queries.in_use if "process" not in what})
    out["recorded observed"] = recorded.observed or ""
    return out


def _agree(a: dict[Any, float], b: dict[Any, float], tolerance: float) -> list[str]:
    problems = [f"series only in Prometheus: {sorted(set(a) - set(b))[:3]}"] if set(a) - set(b) else []
    problems += [f"series only in VictoriaMetrics: {sorted(set(b) - set(a))[:3]}"] if set(b) - set(a) else []
    for key in set(a) & set(b):
        if abs(a[key] - b[key]) > tolerance * max(1.0, abs(a[key])):
            problems.append(f"{dict(key)}: {a[key]} vs {b[key]}")
    return problems


def test_report_and_capacity_dashboard_queries_answer_the_same(stack: Stack) -> None:
    at = time.time() - SETTLE
    queries = dict(_report_queries())
    _, _, targets = capacity_dashboard()
    queries.update({f"panel {t.panel} {t.ref}": substitute(t.expr, 60) for t in targets})
    compared, differ = 0, {}
    for name, query in queries.items():
        mine, theirs = _instant(stack.prometheus, query, at), _instant(stack.victoria, query, at)
        compared += bool(mine)
        problems = _agree(mine, theirs, 0.05)
        if problems:
            differ[name] = (query, problems[:3])
    assert not differ, json.dumps(differ, indent=1)
    answered = {n for n, q in queries.items() if _instant(stack.prometheus, q, at)}
    # no kubelet here (no pods, no namespaces), and too short a history for a 7-day trend
    assert compared >= len(queries) * 2 // 3 and {"raw util", "recorded util", "recorded observed", "raw unhealthy"} <= answered


def test_the_report_reader_reads_victoriametrics_as_it_reads_prometheus(stack: Stack) -> None:
    end = float(int(time.time() - SETTLE) // 10 * 10)  # steps on whole 10 s, as VictoriaMetrics aligns them
    start = end - 10
    mine = read_capacity(PrometheusClient(stack.prometheus), start, end, 10.0, "", None, None, STATES)
    theirs = read_capacity(PrometheusClient(stack.victoria), start, end, 10.0, "", None, None, STATES)
    assert [(c.instance, c.device) for c in mine.chips] == [(c.instance, c.device) for c in theirs.chips]
    for a, b in zip(mine.chips, theirs.chips, strict=True):
        assert [t for t, _ in a.util] == [t for t, _ in b.util], (a.instance, a.device)
        assert all(abs(x - y) <= 0.05 for (_, x), (_, y) in zip(a.util, b.util, strict=True)), (a.util, b.util)
