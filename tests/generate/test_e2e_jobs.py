"""Training-job lifecycle and stragglers end to end with real parts: two exporters on the
simulator, a real Prometheus scraping them every second with the generated rules (the
short-window variant), and training ranks posting steps over HTTP.

A job that finishes (its final message) while NPUMemcpyHigh is pending for it never fires,
nor does any other job alert, in the evaluations after; a job with one rank on each node,
whose rank on the second node spends far longer outside communication, fires
NPUJobStragglerRank for that rank and `diagnose --prometheus` names it with rank, node and chip.
Only 127.0.0.1, every wait a bounded poll, every process started here is stopped here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from exporter.generate.rules import JOB_ALERTS
from exporter.generate.writer import DASHBOARD_DIR, render, write
from exporter.thresholds.table import load_thresholds
from tests.support.cli import run_diagnose
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.promql import substitute
from tests.support.tools import tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

WINDOWS = {"window": "5s", "range": "10s", "handover": "15s"}


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read() or b"{}")


def ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status == 200


def post(url: str, doc: dict[str, Any]) -> int:
    req = urllib.request.Request(url, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status


def wait_for(what: str, check: Callable[[], Any], procs: list[subprocess.Popen[bytes]], within: float) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs), f"a process exited while waiting for {what}"
        try:
            result = check()
        except OSError:
            result = None
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


class Rank(threading.Thread):
    """A training rank: a 0.2 s step every 0.2 s, ``comm`` of it in communication, ``memcpy`` in
    h2d; after ``finish_after`` seconds it sends its final message and stops."""

    def __init__(self, url: str, job: str, rank: int, device: str, comm: float, memcpy: float = 0.02, finish_after: float | None = None):
        super().__init__(daemon=True)
        self.url, self.job, self.rank, self.device = url, job, rank, device
        self.comm, self.memcpy, self.finish_after = comm, memcpy, finish_after
        self.stop_event = threading.Event()
        self.statuses: list[int] = []
        self.finished_at: float | None = None

    def run(self) -> None:
        start = last = time.time()
        while not self.stop_event.wait(0.2):
            now = time.time()
            duration, last = now - last, now
            phases = {"communication": self.comm * duration, "h2d": self.memcpy * duration}
            phases["compute"] = duration - sum(phases.values())
            final = self.finish_after is not None and now - start >= self.finish_after
            step = {"end": now, "duration": duration, "samples": 8, "phases": phases}
            doc = {"job_name": self.job, "rank": self.rank, "world_size": 2, "device": self.device, "framework": "pytorch", "steps": [step]}
            self.statuses.append(post(self.url, {**doc, "final": True} if final else doc))
            if final:
                self.finished_at = time.time()
                return


@pytest.fixture(scope="module")
def prometheus_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("e2e-jobs")
    write(tmp, {rel: text for rel, text in render(load_thresholds(), windows=WINDOWS).items() if rel.startswith("alerts/")})
    a, b, prom = (f"127.0.0.1:{free_port()}" for _ in range(3))
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "cann-exporter", "static_configs": [{"targets": [a, b]}]}],
        "rule_files": [str(tmp / "alerts" / "*.yml")],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_")}
    fast = ["--simulate", "healthy", "--npu-smi.interval", "1s", "--no-hccn.enabled", "--npu-smi.details="]
    logs = [open(tmp / f"{name}.log", "w") for name in ("a", "b", "prometheus")]  # noqa: SIM115 - closed below
    cmds = [
        [sys.executable, "-m", "exporter", "serve", "--listen", a, *fast],
        [sys.executable, "-m", "exporter", "serve", "--listen", b, *fast],
        [
            tool("prometheus"),
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address={prom}",
        ],
    ]
    procs = [subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True) for c, log in zip(cmds, logs)]
    ranks: list[Rank] = []
    try:
        url = f"http://{prom}"
        wait_for(
            "exporters and Prometheus ready",
            lambda: ok(f"http://{a}/readyz") and ok(f"http://{b}/readyz") and ok(f"{url}/-/ready"),
            procs,
            60,
        )
        wait_for("rules loaded", lambda: get(f"{url}/api/v1/rules")["data"]["groups"], procs, 60)
        # Prometheus starts its scrape loops some seconds after it is ready: the job that finishes
        # within seconds must start only once both exporters are being scraped.
        wait_for(
            "both exporters scraped",
            lambda: [t["health"] for t in get(f"{url}/api/v1/targets")["data"]["activeTargets"]] == ["up", "up"],
            procs,
            60,
        )
        ranks = [
            Rank(f"http://{a}/api/v1/steps", "dp", 0, "0", comm=0.5),
            Rank(f"http://{b}/api/v1/steps", "dp", 1, "1", comm=0.05),  # the straggler: the other waits for it
            Rank(f"http://{a}/api/v1/steps", "done", 0, "1", comm=0.0, memcpy=0.5, finish_after=4.0),
        ]
        for rank in ranks:
            rank.start()
        yield {"prometheus": url, "a": a, "b": b, "ranks": ranks, "procs": procs}
    finally:
        for rank in ranks:
            rank.stop_event.set()
            rank.join(timeout=5)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)
        for log in logs:
            log.close()


def alerts(url: str) -> list[dict[str, Any]]:
    return [x["labels"] | {"state": x["state"]} for x in get(f"{url}/api/v1/alerts")["data"]["alerts"]]


def test_a_finished_job_fires_no_job_alert_and_the_straggler_is_named(prometheus_stack: dict[str, Any]) -> None:
    s = prometheus_stack
    url, procs, done = s["prometheus"], s["procs"], s["ranks"][2]
    wait_for(
        "the job that finishes to be pending for NPUMemcpyHigh",
        lambda: any(x["job_name"] == "done" for x in alerts(url) if x.get("job_name")),
        procs,
        60,
    )
    wait_for("the final message", lambda: done.finished_at, procs, 30)
    assert all(status == 200 for rank in s["ranks"] for status in rank.statuses)
    state = wait_for(
        "npu_job_state finished",
        lambda: get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": 'npu_job_state{job_name="done",state="finished"} == 1'}))[
            "data"
        ]["result"],
        procs,
        20,
    )
    assert state
    firing: list[dict[str, Any]] = []
    straggler: list[dict[str, Any]] = []
    deadline = time.monotonic() + 25  # past NPUMemcpyHigh's `for:` (5s) and range (10s) after the finish
    while time.monotonic() < deadline:
        now = alerts(url)
        firing += [x for x in now if x.get("job_name") == "done" and x["state"] == "firing" and x["alertname"] in JOB_ALERTS]
        straggler = [x for x in now if x["alertname"] == "NPUJobStragglerRank" and x["state"] == "firing"] or straggler
        time.sleep(1)
    assert firing == [], firing
    assert [(x["job_name"], x["rank"], x["instance"], x.get("device")) for x in straggler] == [("dp", "1", s["b"], "1")]
    result = run_diagnose("--prometheus", url, "--range", "2m", "--format", "json")
    assert result.out, result.err
    found = [f for level in json.loads(result.out)["levels"].values() for f in level if f["check"] == "straggler"]
    assert len(found) == 1 and "straggler" in found[0]["detail"], [
        (f["subject"], f["check"], f["value"]) for lv in json.loads(result.out)["levels"].values() for f in lv if "dp" in f["subject"]
    ]
    assert f"rank 1 of job dp on {s['b']}, device 1" in found[0]["detail"]
    text = run_diagnose("--prometheus", url, "--range", "2m")
    assert "straggler" in text.out and s["b"] in text.out
    # The training dashboard: every rank's state, the straggler above the others, and no share
    # drawn for the finished job (its idle share would climb to 100%).
    board = json.loads((ROOT / DASHBOARD_DIR / "training-jobs.json").read_text())
    exprs = {p["title"]: [t["expr"] for t in p.get("targets", [])] for p in board["panels"] if p.get("type") != "row"}

    def query(expr: str) -> list[dict[str, Any]]:
        return get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": substitute(expr)}))["data"]["result"]

    states = {(r["metric"]["job_name"], r["metric"]["state"]) for r in query(exprs["Job state"][0])}
    assert ("dp", "running") in states and ("done", "running") not in states, states  # done: finished, or gone after finished_ttl
    busy = {
        r["metric"]["rank"]: float(r["value"][1])
        for r in query(exprs["Time outside communication per iteration, by rank"][0])
        if r["metric"]["job_name"] == "dp"
    }
    assert busy["1"] > 1.5 * busy["0"], busy
    idle = query(exprs["Idle gaps between iterations"][0])
    assert {r["metric"]["job_name"] for r in idle} == {"dp"} and all(0 <= float(r["value"][1]) <= 1 for r in idle), idle
