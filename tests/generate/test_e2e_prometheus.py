"""End to end with real parts: four exporters on the simulator (`underutilized` on a 910B3 node,
`healthy` on a 310P node, `degraded` on a 910B3 node, `sawtooth` on a 910B3 node), a real
Prometheus scraping them every second with the generated rules (a short-window variant made
by the generator's `windows` override), a real Alertmanager with the generated inhibit rules,
and a webhook receiver in this test; a training job posting steps, a finished profile and a
fake kubelet feed the job, profile and namespace panels.
NPULowUtilization must be delivered for exactly the underutilized chips (logic ids 1 and 4)
and nothing else may fire on those two nodes; NPUMemoryPagesIsolated must be delivered for
the degraded node's Critical chip only; the sawtooth and degraded nodes must deliver exactly
their expected notifications while Alertmanager holds the others as inhibited; then every
dashboard query must parse and return data from this Prometheus where the data exists. Last,
the underutilized exporter is killed and started again: its chips' pages go on, with no
"resolved" and no second page.

Only 127.0.0.1, every wait a bounded poll, every process started here is stopped here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.generate.writer import DASHBOARD_DIR, INHIBIT_FILE, render, write
from exporter.pods.podresources_pb import api_pb2 as pb
from exporter.simulator.scenarios import (
    DEGRADED_CRITICAL_LOGIC_ID,
    UNDERUTILIZED_LOGIC_IDS,
)
from exporter.thresholds.table import load_thresholds
from tests.support.cli import run_diagnose, run_report
from tests.support.kubelet import FakeKubelet, container, pod
from tests.support.paths import FIXTURES, ROOT
from tests.support.ports import free_port
from tests.support.profile_builders import Kernel, Step, torch_profile
from tests.support.promql import (
    known_names,
    label_values_query,
    metric_names,
    selectors,
    substitute,
)
from tests.support.tools import tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

# The generator's windows, shortened so the whole run takes seconds: every `for:` 5s, every
# range 10s, rollups evaluated every second. Nothing else differs from the committed rules.
# The utilization alerts average over a whole saw-tooth period (60s), and NPUUtilizationUnstable
# waits longer than NPULowUtilization, as in the table (15m against 10m): the alert that mutes
# it fires first, so what Alertmanager delivers does not depend on which evaluation came first.
# For the same reason NPULowUtilization waits longer than NPUUnhealthy, which mutes it on a
# Critical chip (10m against 1m in the table).
SIMULATED = "CANNExporterSimulated"  # every node here: the alert that says so is checked on its own
# The handover (keep_firing_for) outlasts CANNExporterDown's 5s `for:` by a few evaluations, and
# a restarted exporter's first seconds without chips (until it knows their device ids) many times
# over, as the table's 2m30s outlasts npu_smi.device_wait. The outage bound stays the table's
# (15m): the restart test's outage is well inside it.
HANDOVER = 30.0
WINDOWS = {
    "window": "5s",
    "range": "10s",
    "rollup_interval": "1s",
    "handover": f"{HANDOVER:.0f}s",
    "NPULowUtilization.range": "60s",
    "NPULowUtilization.window": "15s",
    "NPUUtilizationUnstable.range": "60s",
    "NPUUtilizationUnstable.window": "60s",
    # At once, as in the table: it mutes the chip's other pages, so it must fire before them.
    "NPUNeedsIsolation.window": "0s",
}
SAWTOOTH_CHIPS = 8  # the 910b3 model
# What Alertmanager must deliver for the degraded node (logic id 2 Critical with a SeparateNPU
# code, one NPU missing of 8 the PCI fixture shows), and what it must hold back: NPUNeedsIsolation
# is the chip's one page and mutes its health, page-isolation and low-utilization alerts;
# NPUECCDoubleBitErrors, muted too, may or may not have fired by then.
DEGRADED_DELIVERED = {
    ("NPUNeedsIsolation", str(DEGRADED_CRITICAL_LOGIC_ID)),
    ("NPUMissing", ""),
}
DEGRADED_INHIBITED = {(name, str(DEGRADED_CRITICAL_LOGIC_ID)) for name in ("NPULowUtilization", "NPUUnhealthy", "NPUMemoryPagesIsolated")}
EXPECTED_LOW = {str(i) for i in UNDERUTILIZED_LOGIC_IDS}
NODE_NAMES = ("npu-node-1", "npu-node-2")  # the underutilized and the healthy targets' `node`


# --- processes and HTTP -----------------------------------------------------------------------
@dataclass
class Proc:
    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    env: dict[str, str] | None = None

    def start(self, env: dict[str, str] | None = None, mode: str = "w") -> Proc:
        self.env = env
        self._out = open(self.log, mode)  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.args, stdout=self._out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def kill(self) -> None:
        """SIGKILL to its whole session (the simulator's children too), as `kill -9` of a service."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._out.close()

    def restart(self) -> Proc:
        """Start it again after kill(), with the same arguments and environment; its log goes on."""
        return self.start(self.env, mode="a")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self) -> str:
        return f"--- {self.name} log ---\n" + self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: the simulator children too
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._out.close()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def http_post_json(url: str, body: Any, timeout: float = 5.0) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_for(what: str, check: Callable[[], Any], procs: list[Proc], deadline: float) -> Any:
    """Poll ``check`` until it returns something truthy (bounded); fail early if a process died."""
    end = time.monotonic() + deadline
    while True:
        for p in procs:
            assert p.alive(), f"{p.name} exited while waiting for {what}\n{p.tail()}"
        result = check()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline}s\n" + "\n".join(p.tail() for p in procs))
        time.sleep(0.25)


class Webhook:
    """Alertmanager's webhook receiver: records every alert it is sent."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.alerts.extend(json.loads(body).get("alerts", []))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def received(self, alertname: str | None = None) -> set[tuple[str, str, str]]:
        """(alertname, instance, device) of the firing notifications: of ``alertname``, or of every
        alert but CANNExporterSimulated (every node of this stack is simulated, and says so)."""
        with self.lock:
            return {
                (a["labels"].get("alertname", ""), a["labels"].get("instance", ""), a["labels"].get("device", ""))
                for a in self.alerts
                if a.get("status") == "firing"
                and (a["labels"].get("alertname") == alertname if alertname else a["labels"].get("alertname") != SIMULATED)
            }

    def resolved(self, alertname: str, instance: str) -> bool:
        """Whether a "resolved" of ``alertname`` on ``instance`` has arrived."""
        with self.lock:
            return any(
                a.get("status") == "resolved" and a["labels"].get("alertname") == alertname and a["labels"].get("instance") == instance
                for a in self.alerts
            )

    def severities(self, alertname: str) -> set[tuple[str, str, str]]:
        """(instance, device, severity) of every firing notification of ``alertname``."""
        with self.lock:
            return {
                (a["labels"].get("instance", ""), a["labels"].get("device", ""), a["labels"].get("severity", ""))
                for a in self.alerts
                if a.get("status") == "firing" and a["labels"].get("alertname") == alertname
            }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StepPoster:
    """A training loop seen from the exporter: a step every 0.2 s covering the wall time since
    the previous one (no idle gaps), 5% memory copies, 3% framework: healthy on every job alert."""

    def __init__(self, url: str, device: str) -> None:
        self.url, self.device = url, device
        self.stop_event = threading.Event()
        self.statuses: list[int] = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        last = time.time()
        while not self.stop_event.wait(0.2):
            now = time.time()
            duration = now - last
            last = now
            phases = {
                "data": 0.01 * duration,
                "h2d": 0.03 * duration,
                "d2h": 0.02 * duration,
                "compute": 0.85 * duration,
                "framework": 0.03 * duration,
            }
            self.statuses.append(
                http_post_json(
                    self.url,
                    {
                        "job_name": "e2e-bert",
                        "rank": 0,
                        "world_size": 1,
                        "device": self.device,
                        "framework": "pytorch",
                        "pid": os.getpid(),
                        "memory": {"allocated_bytes": 30 << 30, "max_allocated_bytes": 40 << 30},
                        # model FLOPs for 40% of the peak the underutilized node is given (MFU panels)
                        "steps": [{"end": now, "duration": duration, "samples": 32, "phases": phases, "flops": 0.4 * duration * 3.13e14}],
                    },
                )
            )

    def close(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)


def healthy_profile(root: Path) -> Path:
    """A finished torch_npu export within every bound: 95% compute, 2% idle, eight operator
    types of equal time (top 3 = 37.5%, hottest = 12.5%), no memory copies."""
    steps = [Step(i, 9.5, 0.3, 0.2) for i in (1, 2)]
    kernels = [Kernel(i, f"op{n}", f"Op{n}", "AI_CORE", 100.0) for i in (1, 2) for n in range(8)]
    return torch_profile(root, steps=steps, kernels=kernels, host_steps=[(1, 0.0, 10_000.0), (2, 10_000.0, 10_000.0)])


@dataclass
class Stack:
    prometheus: str
    alertmanager: str
    low: str  # instance label of the underutilized exporter
    healthy: str
    degraded: str
    sawtooth: str
    webhook: Webhook
    procs: list[Proc] = field(default_factory=list)

    def query(self, expr: str) -> list[dict[str, Any]]:
        status, body = http_get(f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        doc = json.loads(body or b"{}")
        assert status == 200 and doc.get("status") == "success", f"{expr}: {status} {body[:500]!r}"
        return doc["data"]["result"]

    def query_soon(self, expr: str, within: float = 6.0) -> list[dict[str, Any]]:
        """The query's result, re-asked for a few seconds while it is empty (a source that ran
        late leaves a series stale for a scrape or two on a loaded machine)."""
        end = time.monotonic() + within
        while True:
            result = self.query(expr)
            if result or time.monotonic() > end:
                return result
            time.sleep(0.5)

    def inhibited(self, *instances: str) -> set[tuple[str, str, str]]:
        """(alertname, instance, device) of the alerts Alertmanager holds back by an inhibit rule."""
        status, body = http_get(f"{self.alertmanager}/api/v2/alerts")
        assert status == 200, body
        return {
            (a["labels"]["alertname"], a["labels"].get("instance", ""), a["labels"].get("device", ""))
            for a in json.loads(body)
            if a["status"].get("inhibitedBy") and a["labels"].get("instance", "") in instances
        }

    def firing(self, alertname: str, instance: str) -> dict[str, dict[str, Any]]:
        """Prometheus' firing alerts ``alertname`` of ``instance`` by device: activeAt, annotations, ..."""
        status, body = http_get(f"{self.prometheus}/api/v1/alerts")
        assert status == 200, body
        return {
            a["labels"].get("device", ""): a
            for a in json.loads(body)["data"]["alerts"]
            if a["labels"]["alertname"] == alertname and a["labels"].get("instance") == instance and a["state"] == "firing"
        }

    def active_alerts(self, *instances: str) -> set[tuple[str, str, str, str]]:
        """(alertname, instance, device, state) of the alerts pending or firing on ``instances``."""
        status, body = http_get(f"{self.prometheus}/api/v1/alerts")
        assert status == 200, body
        return {
            (a["labels"]["alertname"], a["labels"].get("instance", ""), a["labels"].get("device", ""), a["state"])
            for a in json.loads(body)["data"]["alerts"]
            if a["labels"].get("instance", "") in instances and a["labels"]["alertname"] != SIMULATED
        }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus, alertmanager = tool("prometheus"), tool("prometheus-alertmanager", "alertmanager")
    tmp = tmp_path_factory.mktemp("e2e")
    files = render(load_thresholds(), windows=WINDOWS)
    write(tmp, {rel: text for rel, text in files.items() if rel.startswith("alerts/")})
    exporter_port, healthy_port, degraded_port, saw_port, prom_port, am_port = (free_port() for _ in range(6))
    low, healthy, degraded = f"127.0.0.1:{exporter_port}", f"127.0.0.1:{healthy_port}", f"127.0.0.1:{degraded_port}"
    sawtooth = f"127.0.0.1:{saw_port}"
    webhook = Webhook()
    (tmp / "alertmanager.yml").write_text(
        yaml.safe_dump(
            {
                "route": {
                    "receiver": "test",
                    "group_by": ["alertname", "instance", "device"],
                    "group_wait": "1s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [
                    {"name": "test", "webhook_configs": [{"url": f"http://127.0.0.1:{webhook.port}/alerts", "send_resolved": True}]}
                ],
                # The shipped inhibit rules, as `cann-exporter generate` writes them.
                "inhibit_rules": yaml.safe_load(files[INHIBIT_FILE])["inhibit_rules"],
            }
        )
    )
    prometheus_config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        # Two targets carry a `node` label, as the Kubernetes relabeling gives it; two do not.
        "scrape_configs": [
            {
                "job_name": "cann-exporter",
                "static_configs": [
                    {"targets": [low], "labels": {"node": NODE_NAMES[0]}},
                    {"targets": [healthy], "labels": {"node": NODE_NAMES[1]}},
                    {"targets": [degraded, sawtooth]},
                ],
            }
        ],
    }
    # Rules are loaded only once both targets have been scraped (see below).
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config))
    fast = ["--npu-smi.interval", "1s", "--npu-smi.detail-interval", "2s", "--max-age", "8s"]
    # hccn_tool (network panels) on the underutilized node only. Each simulated call is a whole
    # Python process: a round of 8 chips can take 15 s on a loaded machine, so that node's data
    # may be older than the others' 8 s before it ages out.
    hccn = ["--hccn.interval", "5s", "--hccn.slow-interval", "5s", "--max-age", "60s"]
    profiles = tmp / "profiles"
    healthy_profile(profiles / "e2e-bert_rank0_ascend_pt")
    # A kubelet that allocated chips 0 (busy) and 1 (low) of the underutilized node to one pod.
    sock_dir = Path(tempfile.mkdtemp(prefix="klt", dir="/tmp"))
    kubelet = FakeKubelet(sock_dir / "kubelet.sock")
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[pod("train", "bert-0", container("main", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"])))]
    )
    kubelet.start()
    pods = ["--podresources.enabled", "--podresources.socket", str(kubelet.socket), "--podresources.interval", "1s"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_")}
    procs = [
        Proc(
            "exporter underutilized",
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--simulate",
                "underutilized",
                "--listen",
                low,
                *fast,
                "--npu-smi.details",
                "usages,common,ecc,memory,volt,pcie-err,sensors,hccs,hccs-bw",
                # The health and interconnect row; 20 s keeps the simulated calls few. hccs-bw asks
                # its chips one after another, each waiting for a runner slot behind the details:
                # a round took over 60 s under load (overdue, its readings aged out). At 60 s its
                # readings are kept 120 s and a round may take 180 s before it is overdue.
                "--npu-smi.hardware-interval",
                "20s",
                "--npu-smi.hccs-bw-interval",
                "60s",
                "--npu-smi.hccs-bw-time",
                "10ms",
                "--profile-dir",
                str(profiles),
                "--profiles.interval",
                "1s",
                "--npu-smi.peak-flops=910B3:bf16=3.13e14",
                *pods,
                *hccn,
            ],
            tmp / "exporter-low.log",
        ),
        # Another model for the healthy node, so DDR (310P) as well as HBM (910B3) panels are fed.
        Proc(
            "exporter healthy",
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--simulate",
                "healthy",
                "--simulate.model",
                "310p-duo",
                "--listen",
                healthy,
                *fast,
                "--no-hccn.enabled",
            ],
            tmp / "exporter-healthy.log",
        ),
        # A failing chip (Critical, isolating HBM pages) on a third node, which lists 7 of the 8
        # chips its (fixture) sysfs shows; only the sources its alerts need.
        Proc(
            "exporter degraded",
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--simulate",
                "degraded",
                "--listen",
                degraded,
                *fast,
                "--npu-smi.details",
                "ecc,health",
                "--no-hccn.enabled",
                "--npu-smi.sysfs",
                str(FIXTURES / "sysfs" / "910B3-8card__written"),
            ],
            tmp / "exporter-degraded.log",
        ),
        # Every chip in use, in a saw-tooth around a 52% mean; the overview is all its alerts need.
        Proc(
            "exporter sawtooth",
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--simulate",
                "sawtooth",
                "--listen",
                sawtooth,
                *fast,
                "--npu-smi.details=",
                "--no-npu-smi.board",
                "--no-hccn.enabled",
            ],
            tmp / "exporter-sawtooth.log",
        ),
        Proc(
            "alertmanager",
            [
                alertmanager,
                f"--config.file={tmp / 'alertmanager.yml'}",
                f"--storage.path={tmp / 'am'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ],
            tmp / "alertmanager.log",
        ),
        # A resend delay of 1s (default 1m): an alert that fires at the first evaluation after the
        # rules are loaded can be dropped while the reload re-discovers Alertmanager.
        Proc(
            "prometheus",
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--rules.alert.resend-delay=1s",
            ],
            tmp / "prometheus.log",
        ),
    ]
    posters: list[StepPoster] = []
    s = Stack(f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", low, healthy, degraded, sawtooth, webhook, procs)
    exporters = procs[:4]
    try:
        # Exporters first: a Prometheus that starts scraping before they listen would see
        # `up == 0` and, on a loaded machine, fire CANNExporterDown before the test begins.
        for proc in exporters:
            proc.start(env)
        wait_for(
            "exporters ready",
            lambda: all(http_get(f"http://{a}/readyz")[0] == 200 for a in (low, healthy, degraded, sawtooth)),
            exporters,
            60,
        )
        for proc in procs[4:]:
            proc.start(env)
        # A training job reporting on one low chip of the underutilized node (job panels need data).
        posters.append(StepPoster(f"http://{low}/api/v1/steps", min(EXPECTED_LOW)))
        posters[-1].thread.start()
        wait_for(
            "Prometheus and Alertmanager ready",
            lambda: http_get(f"{s.prometheus}/-/ready")[0] == 200 and http_get(f"{s.alertmanager}/-/ready")[0] == 200,
            procs,
            30,
        )
        # Load the rules only after every exporter was scraped: before its first scrape
        # `absent(up)` holds, and on a loaded machine CANNExporterDown (5s `for:` here)
        # could fire before the test even starts.
        wait_for("every target scraped", lambda: len(s.query("up == 1")) == 4, procs, 60)
        (tmp / "prometheus.yml").write_text(yaml.safe_dump({**prometheus_config, "rule_files": [str(tmp / "alerts" / "*.yml")]}))
        procs[-1].proc.send_signal(signal.SIGHUP)  # Prometheus re-reads its configuration
        wait_for(
            "rules loaded",
            lambda: json.loads(http_get(f"{s.prometheus}/api/v1/rules")[1] or b"{}").get("data", {}).get("groups"),
            procs,
            30,
        )
        yield s
    finally:
        for poster in posters:
            poster.close()
        for proc in reversed(procs):
            proc.stop()
        webhook.close()
        kubelet.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    assert all(status == 200 for status in posters[0].statuses[:50]), posters[0].statuses[:50] if posters else None


# --- alerts -----------------------------------------------------------------------------------
def test_low_utilization_is_delivered_for_exactly_the_underutilized_chips(stack: Stack) -> None:
    expected = {("NPULowUtilization", stack.low, device) for device in EXPECTED_LOW}
    wait_for("NPULowUtilization for both low chips at the webhook", lambda: stack.webhook.received() >= expected, stack.procs, 90)
    # Every rule has had its windows (10s range, 5s for:) pass by now; keep watching for a few
    # more evaluation rounds that nothing else goes pending or firing on either node.
    end = time.monotonic() + 8
    while time.monotonic() < end:
        active = stack.active_alerts(stack.low, stack.healthy)
        assert active == {(name, inst, dev, "firing") for name, inst, dev in expected}, active
        time.sleep(0.5)
    received = {(name, inst, dev) for name, inst, dev in stack.webhook.received() if inst in (stack.low, stack.healthy)}
    assert received == expected, received
    series = stack.query(f'ALERTS{{instance="{stack.healthy}", alertname!="{SIMULATED}"}}')
    assert series == [], f"the healthy node has alerts: {series}"


def test_every_simulated_node_says_so_once(stack: Stack) -> None:
    nodes = {stack.low, stack.healthy, stack.degraded, stack.sawtooth}
    expected = {(SIMULATED, node, "") for node in nodes}
    wait_for("CANNExporterSimulated for every node", lambda: stack.webhook.received(SIMULATED) >= expected, stack.procs, 60)
    assert {a for a in stack.webhook.received(SIMULATED) if a[1] in nodes} == expected


def test_page_isolation_fires_for_the_failing_chip_only_in_one_tier(stack: Stack) -> None:
    """The Critical chip isolates HBM pages after double-bit errors: Prometheus fires the critical
    tier for it alone; Alertmanager holds it back, since NPUNeedsIsolation pages for that chip."""
    critical = (stack.degraded, str(DEGRADED_CRITICAL_LOGIC_ID))
    expr = 'ALERTS{alertname="NPUMemoryPagesIsolated", alertstate="firing"}'
    wait_for(
        "NPUMemoryPagesIsolated firing for the Critical chip",
        lambda: any((r["metric"].get("instance"), r["metric"].get("device")) == critical for r in stack.query(expr)),
        stack.procs,
        60,
    )
    tiers = {
        (r["metric"].get("instance"), r["metric"].get("device"), r["metric"].get("severity"))
        for r in stack.query(expr)
        if r["metric"].get("instance") in (stack.low, stack.healthy, stack.degraded)
    }
    assert tiers == {(*critical, "critical")}, tiers  # one tier: no warning beside it
    wait_for(
        "NPUMemoryPagesIsolated held back by NPUNeedsIsolation",
        lambda: ("NPUMemoryPagesIsolated", *critical) in stack.inhibited(stack.degraded),
        stack.procs,
        60,
    )
    assert stack.webhook.severities("NPUMemoryPagesIsolated") == set()


def test_needs_isolation_pages_the_separate_npu_chip_once_and_mutes_its_lower_pages(stack: Stack) -> None:
    """The degraded chip's codes include a SeparateNPU one: NPUNeedsIsolation is delivered once,
    for that chip alone, critical, and its NPUUnhealthy and NPUMemoryPagesIsolated are held back."""
    critical = (stack.degraded, str(DEGRADED_CRITICAL_LOGIC_ID))
    wait_for(
        "NPUNeedsIsolation for the SeparateNPU chip at the webhook",
        lambda: ("NPUNeedsIsolation", *critical) in stack.webhook.received("NPUNeedsIsolation"),
        stack.procs,
        60,
    )
    muted = {(name, *critical) for name in ("NPUUnhealthy", "NPUMemoryPagesIsolated")}
    wait_for("the chip's lower pages held back", lambda: stack.inhibited(stack.degraded) >= muted, stack.procs, 60)
    with stack.webhook.lock:
        pages = {
            tuple(sorted(a["labels"].items()))
            for a in stack.webhook.alerts
            if a["labels"].get("alertname") == "NPUNeedsIsolation" and a.get("status") == "firing"
        }
        summaries = {a["annotations"]["summary"] for a in stack.webhook.alerts if a["labels"].get("alertname") == "NPUNeedsIsolation"}
    assert len(pages) == 1, pages  # one alert: one chip, one level
    labels = dict(next(iter(pages)))
    assert (labels["instance"], labels["device"], labels["level"], labels["severity"]) == (*critical, "SeparateNPU", "critical")
    assert summaries == {
        f"NPU device {DEGRADED_CRITICAL_LOGIC_ID} on {stack.degraded} must leave service (SeparateNPU): "
        "take the chip out of service now and have the hardware repaired or replaced"
    }
    received = stack.webhook.received()
    assert not {a for a in received if a[0] in ("NPUUnhealthy", "NPUMemoryPagesIsolated") and a[1:] == critical}, received


# --- diagnose against this Prometheus ---------------------------------------------------------
def test_diagnose_names_the_degraded_nodes_hardware_faults(stack: Stack) -> None:
    """What the alerts page on for the degraded node, `diagnose --prometheus` names: the Critical
    chip with its codes and the missing chip (7 listed, 8 in its sysfs); the Critical chip's low
    utilization is a consequence with hardware advice, no pipeline lever."""
    wait_for(
        "the degraded node's health codes and expected chips scraped",
        lambda: (
            stack.query(f'npu_health_error_info{{instance="{stack.degraded}"}}')
            and stack.query(f'npu_expected_devices{{instance="{stack.degraded}"}}')
        ),
        stack.procs,
        60,
    )
    result = run_diagnose(
        "--prometheus", stack.prometheus, "--range", "1m", "--selector", f'{{instance="{stack.degraded}"}}', "--format", "json"
    )
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    critical = f"{stack.degraded} NPU {DEGRADED_CRITICAL_LOGIC_ID} chip 0 (device {DEGRADED_CRITICAL_LOGIC_ID})"
    off = {(f["subject"], f["check"]): f for f in doc["levels"]["hardware"] if f["verdict"] == "abnormal"}
    health = off[(critical, "health")]
    assert health["alert"] == "NPUNeedsIsolation" and "Critical" in health["detail"] and "80E18005 (RestartNPU)" in health["detail"]
    assert "fault level SeparateNPU: take the chip out of service now" in health["detail"]
    missing = off[(f"{stack.degraded}: chips", "missing")]
    assert missing["value"] == 1 and missing["detail"].startswith("7 of 8 chips listed by npu-smi"), missing
    assert 'npu_expected_devices{source="pci"} (the Ascend PCI functions in sysfs)' in missing["detail"], missing
    (util,) = [f for f in doc["levels"]["macro"] if f["subject"] == critical and f["check"] == "utilization"]
    assert util["verdict"] is None and "consequence of the hardware fault" in util["detail"]
    advice = {a["key"]: a for a in doc["advice"]}
    assert "device_utilization" not in advice and any("drain" in lever for lever in advice["NPUNeedsIsolation"]["levers"])


def test_diagnose_judges_a_young_job_over_its_own_life(stack: Stack) -> None:
    """The job posting since the stack started is minutes old: over a 1h window its rates are
    its own (not spread over the hour), its age is shown, and it is too young to be warned about."""
    wait_for("the job's iterations scraped", lambda: stack.query("rate(npu_job_iterations_total[10s]) > 0"), stack.procs, 60)
    result = run_diagnose(
        "--prometheus", stack.prometheus, "--range", "1h", "--selector", f'{{instance="{stack.low}"}}', "--format", "json"
    )
    doc = json.loads(result.out)
    job = {f["check"]: f for f in doc["levels"]["macro"] if f["subject"].startswith("job e2e-bert")}
    assert 0 < job["job_age"]["value"] < 300 and "too young to judge" in job["job_age"]["detail"], job["job_age"]
    idle = job["idle_gaps"]
    # the loop has no gaps: over the hour the old reading was above 90% idle
    assert idle["value"] < 0.3 and idle["verdict"] is None and "too young" in idle["detail"], idle
    (rate,) = [f for f in doc["levels"]["meso"] if f["subject"].startswith("job e2e-bert") and f["check"] == "iteration_rate"]
    assert rate["value"] > 1.0, rate  # a step every 0.2 s (slower on a loaded machine), not its hourly average
    assert "idle_share" not in {a["key"] for a in doc["advice"]}


def test_report_names_nodes_by_their_node_label(stack: Stack, tmp_path: Path) -> None:
    """Targets with a `node` label are reported by it; the others by their target."""
    pytest.importorskip("matplotlib")
    # the report's last step ends on a whole minute: wait until one has passed with data
    wait_for(
        "a report with a whole minute of data",
        lambda: (r := run_report("--prometheus", stack.prometheus, "--range", "1h", "--out", str(tmp_path))).code == 0 and r,
        stack.procs,
        120,
    )
    doc = json.loads((tmp_path / "capacity.json").read_text())
    nodes = {n["instance"]: n for n in doc["nodes"]}
    assert set(nodes) == {*NODE_NAMES, stack.degraded, stack.sawtooth}
    # the degraded node: 8 installed (its sysfs), 7 seen, the Critical chip unhealthy and never
    # counted as allocated or as a chip in use below the bound
    assert nodes[stack.degraded]["inventory"] == {"expected": 8, "seen": 7, "unhealthy": 1, "unread": 0}
    critical = f"NPU {DEGRADED_CRITICAL_LOGIC_ID} "
    assert not [c for c in doc["chips_below"] if c["instance"] == stack.degraded and critical in c["subject"]]


# --- dashboards against this Prometheus -------------------------------------------------------
# Series that exist only after an event this run does not cause (an error, a rejected or
# dropped batch, an expired rank), or that the simulator does not produce by default.
EVENT_SERIES = {
    "cann_exporter_source_errors_total": "no source error in this run",
    "cann_exporter_source_subject_failing": "no source subject failing in this run (the degraded node reads only ecc and health)",
    "cann_exporter_ingest_rejected_total": "no rejected batch in this run",
    "cann_exporter_ingest_client_dropped_steps_total": "no client reported dropped steps",
    "cann_exporter_ingest_expired_total": "no job rank expired in this run",
    "cann_exporter_memory_limit_bytes": "the exporters run without a cgroup memory limit on this machine",
    # Answered by Atlas A3 and 950 only (no such simulated node here: the A3 answers them in
    # tests/node/test_metric_contract.py).
    "npu_sio_errors_total": "die-to-die (SIO) counters, A3 and 950 only",
    "npu_superpod_info": "super pods, A3 and 950 only",
}


# Totals every simulated chip here reports as 0: a ratio of them is left out (no NaN), so empty.
ZERO_TOTALS = {"npu_hugepages_total_pages": "zero total: the simulated chips have 0 huge pages of 0, as most 910B and 310P chips"}


def why_empty(stack: Stack, expr: str) -> str | None:
    """Why an empty result is legitimate here, or None when the query should have returned data."""
    names = metric_names(expr)
    if "npu_profile_memcpy_kind_ratio" in names:
        return "profile: the fed profile has no memory copies"
    if " offset " in expr:
        # The baseline (a day ago) does not exist yet; the same query against 5s ago must work.
        if stack.query(re.sub(r" offset \w+", " offset 5s", expr)):
            return "baseline: needs a day of history (checked with offset 5s instead)"
        return None
    missing = {s.name for s in selectors(expr) if not stack.query(f"count({s})")}
    if missing and missing <= set(EVENT_SERIES):
        return "; ".join(EVENT_SERIES[n] for n in sorted(missing))
    zero = {n for n in names & set(ZERO_TOTALS) if stack.query(n) and not stack.query(f"{n} > 0")}
    if zero:
        return "; ".join(ZERO_TOTALS[n] for n in sorted(zero))
    return None


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    # Wait until the slowest inputs exist: the rollup records and the job counters' rates.
    wait_for(
        "recording rules, job and profile series",
        lambda: (
            stack.query("cluster:npu_idle_chip_hours:sum1d")
            and stack.query("rate(npu_job_iterations_total[10s]) > 0")
            and stack.query("npu_profile_compute_ratio")
            and stack.query("namespace:npu_unused_chip_hours:sum1d")
            and stack.query("npu_network_receive_bytes_per_second")
            and stack.query("npu_optical_temperature_celsius")
            and stack.query("chip:npu_aicore_utilization_ratio:avg1h")
            # hccs-bw's first round comes after every other group's, one chip at a time.
            and stack.query("npu_hccs_bandwidth_bytes_per_second")
        ),
        stack.procs,
        180,
    )
    known = known_names()
    checked, skipped, failures = 0, {}, []
    for path in sorted((ROOT / DASHBOARD_DIR).glob("*.json")):
        board = json.loads(path.read_text())
        for var in board["templating"]["list"]:
            if var["type"] != "query":
                continue
            selector, label = label_values_query(var["query"]["query"])
            if not stack.query(f"group by ({label}) ({substitute(selector)})"):
                failures.append(f"{path.stem} variable {var['name']}: no values")
        for panel in (p for p in board["panels"] if p["type"] != "row"):
            for target in panel["targets"]:
                expr = substitute(target["expr"])
                assert not metric_names(expr) - known
                checked += 1
                if stack.query_soon(expr):
                    continue
                where = f"{path.stem}: {panel['title']} [{target['refId']}]"
                reason = why_empty(stack, expr)
                if reason:
                    skipped[where] = reason
                else:
                    failures.append(f"{where} returned nothing:\n  {expr}")
    assert not failures, "\n".join(failures)
    assert checked > 100
    kinds = {reason.split(":")[0] for reason in skipped.values()}
    assert kinds <= {"baseline", "zero total"} | set(EVENT_SERIES.values()), kinds
    # What could not be checked here, and why (pytest -rP shows it).
    print("\n".join(f"not checked: {k}: {v}" for k, v in sorted(skipped.items())))


# --- inhibition (last: its muted alerts need the longest `for:`, which the tests above wait out) ----
def test_node_variable_picks_instances_and_falls_back_to_them(stack: Stack) -> None:
    """The dashboards' Node variable lists the `node` labels; Instance lists the targets of the
    chosen nodes, and every target (with or without `node`) when Node is All or empty."""
    board = json.loads((ROOT / DASHBOARD_DIR / "fleet-overview.json").read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    selector, label = label_values_query(variables["node"]["query"]["query"])
    assert label == "node"
    # (the targets without a node group under no label: Grafana lists no value for them)
    assert {s["metric"].get(label) for s in stack.query(f"group by ({label}) ({substitute(selector)})")} == {*NODE_NAMES, None}
    selector, label = label_values_query(variables["instance"]["query"]["query"])

    def instances(node: str) -> set[str]:
        expr = substitute(selector.replace("$node", node))
        return {s["metric"]["instance"] for s in stack.query(f"group by (instance) ({expr})")}

    assert instances(NODE_NAMES[0]) == {stack.low}
    assert instances(f"{NODE_NAMES[0]}|{NODE_NAMES[1]}") == {stack.low, stack.healthy}
    assert instances(".*") == instances("") | {stack.low, stack.healthy} == {stack.low, stack.healthy, stack.degraded, stack.sawtooth}
    assert instances("") == {stack.degraded, stack.sawtooth}  # no node selected: the targets without one


def test_inhibition_delivers_exactly_the_expected_notifications(stack: Stack) -> None:
    """Sawtooth: NPULowUtilization for every chip, NPUUtilizationUnstable of the same chips held
    back (NPULowUtilization mutes it). Degraded: the SeparateNPU chip's NPUNeedsIsolation and the
    node's missing chip; the chip's health, page isolation and low utilization held back."""
    saw_delivered = {("NPULowUtilization", stack.sawtooth, str(d)) for d in range(SAWTOOTH_CHIPS)}
    saw_inhibited = {("NPUUtilizationUnstable", stack.sawtooth, str(d)) for d in range(SAWTOOTH_CHIPS)}
    delivered = saw_delivered | {(name, stack.degraded, dev) for name, dev in DEGRADED_DELIVERED}
    inhibited = saw_inhibited | {(name, stack.degraded, dev) for name, dev in DEGRADED_INHIBITED}
    wait_for(
        "the muted alerts held back by Alertmanager", lambda: stack.inhibited(stack.sawtooth, stack.degraded) >= inhibited, stack.procs, 120
    )
    wait_for(
        "the expected notifications at the webhook",
        lambda: {a for a in stack.webhook.received() if a[1] in (stack.sawtooth, stack.degraded)} >= delivered,
        stack.procs,
        30,
    )
    time.sleep(3)  # a few more group intervals: anything muted that slipped through would arrive now
    received = {a for a in stack.webhook.received() if a[1] in (stack.sawtooth, stack.degraded)}
    assert received == delivered, (
        f"unexpected: {sorted(received - delivered)}, missing: {sorted(delivered - received)}, "
        f"held back: {sorted(stack.inhibited(stack.sawtooth, stack.degraded))}"
    )
    with stack.webhook.lock:
        missing = [
            a["annotations"]["description"]
            for a in stack.webhook.alerts
            if a["labels"].get("alertname") == "NPUMissing" and a["labels"].get("instance") == stack.degraded
        ]
    assert missing and "reports 1 NPU chip(s) fewer than expected" in missing[0] and "should have 8 (pci)." in missing[0], missing


# --- handover and restart (last: it kills an exporter) ------------------------------------------
HELD_TEXT = "does not answer Prometheus (CANNExporterDown): this alert keeps the state it had"


def test_a_killed_exporter_restarted_continues_its_pages_without_a_resolved(stack: Stack) -> None:
    """`kill -9` the underutilized exporter while its chips page: CANNExporterDown (with its
    instance) is delivered; past the handover its chips' pages still fire, held (their condition
    cannot be seen); the exporter started again, they go on as the same alerts (same activeAt, the
    description from their readings again), and the webhook gets neither a "resolved" nor a second
    page for them: only the down page and its resolution."""
    low_pages = {("NPULowUtilization", stack.low, device) for device in EXPECTED_LOW}
    wait_for("the low chips paging", lambda: stack.webhook.received() >= low_pages, stack.procs, 90)
    wait_for(
        "the low chips firing in Prometheus", lambda: set(stack.firing("NPULowUtilization", stack.low)) >= EXPECTED_LOW, stack.procs, 30
    )
    before = {d: a["activeAt"] for d, a in stack.firing("NPULowUtilization", stack.low).items() if d in EXPECTED_LOW}
    exporter = next(p for p in stack.procs if p.name == "exporter underutilized")
    with stack.webhook.lock:
        seen = len(stack.webhook.alerts)
    exporter.kill()
    killed = time.monotonic()
    others = [p for p in stack.procs if p is not exporter]
    down = ("CANNExporterDown", stack.low, "")
    wait_for("CANNExporterDown for the killed target", lambda: down in stack.webhook.received(), others, 60)
    # Past the handover the pages would have ended without the hold: they still fire, held.
    time.sleep(max(0.0, killed + HANDOVER + 3 - time.monotonic()))
    held = stack.firing("NPULowUtilization", stack.low)
    assert set(held) >= EXPECTED_LOW, f"the low chips' pages ended while their exporter was down: {sorted(held)}"
    assert all(HELD_TEXT in held[d]["annotations"]["description"] for d in EXPECTED_LOW), held
    exporter.restart()
    restarted = time.monotonic()

    def continued() -> bool:
        """Every low chip's page fires from its readings again (its description re-rendered)."""
        now = stack.firing("NPULowUtilization", stack.low)
        return all(d in now and "averaged" in now[d]["annotations"]["description"] for d in EXPECTED_LOW)

    wait_for("the low chips' pages firing from their readings again", continued, stack.procs, HANDOVER)
    took = time.monotonic() - restarted
    after = {d: a["activeAt"] for d, a in stack.firing("NPULowUtilization", stack.low).items() if d in EXPECTED_LOW}
    assert after == before, f"the pages started again: activeAt {before} before the kill, {after} after the restart ({took:.1f}s)"
    wait_for("CANNExporterDown resolved at the webhook", lambda: stack.webhook.resolved("CANNExporterDown", stack.low), stack.procs, 60)
    time.sleep(3)  # a few group intervals: a "resolved" or a page that slipped through would arrive now
    with stack.webhook.lock:
        events = [
            (a["status"], a["labels"].get("alertname"), a["labels"].get("device", ""), i >= seen)
            for i, a in enumerate(stack.webhook.alerts)
            if a["labels"].get("instance") == stack.low
        ]
    # Every alert of the node paged before the kill (the low chips', CANNExporterSimulated): nothing
    # more of it, neither "resolved" nor a second page. (What the outage itself causes may page:
    # the training job's steps posted meanwhile were lost.)
    paged = {(name, device) for status, name, device, after in events if not after and status == "firing" and name != "CANNExporterDown"}
    assert paged >= {("NPULowUtilization", device) for device in EXPECTED_LOW}, paged
    since = [(status, name, device) for status, name, device, after in events if after]
    again = [e for e in since if e[1:] in paged]
    assert not again, f"after the kill and restart ({took:.1f}s to continue), for what had paged: {again} of {since}"
    assert ("firing", "CANNExporterDown", "") in since and ("resolved", "CANNExporterDown", "") in since, since
