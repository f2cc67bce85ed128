"""End to end: real PyTorch loops with the hook against a real `cann-exporter serve` process.

Loopback only; every wait is a bounded poll of /metrics, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from exporter.hooks import Monitor
from tests.support.hooks import ROOT, run_script, wait_until

try:
    import torch
except ImportError:  # the loop tests need PyTorch; the TTL test does not
    torch = None

pytestmark = pytest.mark.e2e
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")


def tiny_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model, opt, x, y) -> None:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


@needs_torch
def test_iterations_and_phase_sums_match_what_the_loop_recorded(start_exporter):
    exporter = start_exporter()
    model, opt = tiny_model()
    data = [(torch.randn(8, 16), torch.randn(8, 1)) for _ in range(5)]

    # A loop that times itself: the exporter must hold exactly these sums.
    mon = Monitor("e2e-exact", url=exporter.url, rank=0, world_size=1, device=2, flush_interval=0.05)
    totals = {"data": 0.0, "compute": 0.0}
    duration_sum = 0.0
    steps = 40
    for i in range(steps):
        t0 = time.perf_counter()
        x, y = data[i % len(data)]
        t1 = time.perf_counter()
        train_step(model, opt, x, y)
        t2 = time.perf_counter()
        phases = {"data": t1 - t0, "compute": t2 - t1}
        mon.record_step(t2 - t0, samples=len(x), phases=phases)
        totals["data"] += phases["data"]
        totals["compute"] += phases["compute"]
        duration_sum += t2 - t0
    mon.close()

    key = {"job_name": "e2e-exact", "rank": "0"}
    exporter.wait_value("npu_job_iterations_total", steps, **key)
    assert exporter.value("npu_job_samples_total", **key) == steps * 8
    assert exporter.value("npu_job_iteration_duration_seconds_count", **key) == steps
    assert exporter.value("npu_job_iteration_duration_seconds_sum", **key) == pytest.approx(duration_sum, rel=1e-9)
    for phase, total in totals.items():
        assert exporter.value("npu_job_phase_seconds_total", phase=phase, **key) == pytest.approx(total, rel=1e-9)
    assert exporter.value("npu_job_info", device="2", world_size="1", framework="python", **key) == 1
    # The job's `device` joins the chip metrics (the simulator serves logic ids 0..7), once the
    # first npu-smi round is in (the steps may arrive first on a busy machine).
    exporter.wait_value("npu_device_info", 1, deadline=60.0, device="2")
    assert exporter.value("cann_exporter_ingest_client_dropped_steps_total") == 0


@needs_torch
def test_context_manager_loop(start_exporter):
    exporter = start_exporter()
    model, opt = tiny_model()
    from exporter.hooks.torch import TorchMonitor

    mon = TorchMonitor("e2e-with", url=exporter.url, flush_interval=0.05)
    outer = 0.0
    for _ in range(30):
        x, y = torch.randn(4, 16), torch.randn(4, 1)
        t0 = time.perf_counter()
        with mon.step(samples=len(x)):
            with mon.phase("h2d"):
                x, y = x.to("cpu"), y.to("cpu")
            with mon.phase("compute"):
                train_step(model, opt, x, y)
        outer += time.perf_counter() - t0
    mon.close()
    key = {"job_name": "e2e-with", "rank": "0"}
    exporter.wait_value("npu_job_iterations_total", 30, **key)
    assert exporter.value("npu_job_samples_total", **key) == 120
    compute = exporter.value("npu_job_phase_seconds_total", phase="compute", **key)
    h2d = exporter.value("npu_job_phase_seconds_total", phase="h2d", **key)
    total = exporter.value("npu_job_iteration_duration_seconds_sum", **key)
    assert 0 < h2d + compute <= total <= outer
    assert exporter.value("npu_job_info", framework="pytorch", **key) == 1


@needs_torch
def test_exporter_killed_mid_run_does_not_disturb_the_loop(start_exporter):
    exporter = start_exporter()
    model, opt = tiny_model()
    mon = Monitor("e2e-kill", url=exporter.url, flush_interval=0.02, max_backoff=0.2, timeout=1.0)
    key = {"job_name": "e2e-kill", "rank": "0"}
    completed = 0
    sent_before = None
    for i in range(300):
        x, y = torch.randn(4, 16), torch.randn(4, 1)
        with mon.step(samples=4):
            with mon.phase("compute"):
                train_step(model, opt, x, y)
        completed += 1
        if i == 99:
            wait_until(lambda: (exporter.value("npu_job_iterations_total", **key) or 0) >= 50, what="first steps arrive")
            exporter.kill()
            sent_before = mon.stats()["sent"]  # what the old process acknowledged
        if i == 199:
            exporter.start()  # same port: an exporter restart
    assert completed == 300
    mon.flush(timeout=10)
    mon.close(timeout=10)
    stats = mon.stats()
    assert stats["sent"] + stats["dropped"] == 300 and stats["buffered"] == 0
    assert stats["sent"] > sent_before  # reporting resumed after the restart
    exporter.wait_value("npu_job_iterations_total", stats["sent"] - sent_before, **key)
    assert exporter.value("cann_exporter_ingest_client_dropped_steps_total") == stats["dropped"]


FORK_LOOP = """
import json, os, sys, time
import torch
from exporter.hooks import Monitor

mon = Monitor("e2e-fork", url="{url}", flush_interval=0.01)
data = torch.utils.data.TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=2, multiprocessing_context="fork", persistent_workers=False)
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 0
for epoch in range(3):                      # new DataLoader workers are forked every epoch
    for x, y in loader:
        with mon.step(samples=len(x)):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        steps += 1
pid = os.fork()                             # a child that reports steps of its own, as the same rank
if pid == 0:
    for _ in range(10):
        with mon.step(samples=1):
            pass
    mon.close(timeout=10)
    os._exit(0)
deadline = time.monotonic() + 30
while not os.waitpid(pid, os.WNOHANG)[0]:
    assert time.monotonic() < deadline, "forked child hung"
    time.sleep(0.01)
mon.close(timeout=10)
print(json.dumps({{"steps": steps, "stats": mon.stats()}}))
"""


@needs_torch
def test_forked_workers_neither_duplicate_nor_deadlock(start_exporter):
    exporter = start_exporter()
    proc = run_script(FORK_LOOP.format(url=exporter.url), timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["steps"] == 48 and result["stats"]["dropped"] == 0
    key = {"job_name": "e2e-fork", "rank": "0"}
    exporter.wait_value("npu_job_iterations_total", 48, **key)
    assert exporter.value("npu_job_samples_total", **key) == 3 * 256
    # The child is another live process claiming the parent's job_name and rank: refused, never summed in.
    wait_until(lambda: (exporter.value("cann_exporter_ingest_rejected_total", reason="duplicate_rank") or 0) >= 1, what="the child refused")


def post(url: str, doc: dict) -> int:
    request = urllib.request.Request(url + "/api/v1/steps", data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as resp:
        return resp.status


def test_ttl_expiry_removes_series(start_exporter):
    # TTLs well above the exporter's 1 s coalescing of the jobs part, so all three are seen at once.
    exporter = start_exporter("--ingest.ttl", "4s", "--ingest.finished-ttl", "3s")
    # A job that simply stops (a crash): gone after the TTL.
    assert post(exporter.url, {"job_name": "crashed", "rank": 0, "steps": [{"duration": 0.5}]}) == 200
    # A job that closed its Monitor: gone after the finished TTL.
    closed = Monitor("closed", url=exporter.url, flush_interval=0.05)
    closed.record_step(0.5, phases={"h2d": 0.1})
    closed.close()
    # A job that is alive but not stepping (stuck): kept by the client's heartbeat.
    stuck = Monitor("stuck", url=exporter.url, flush_interval=0.05, heartbeat_interval=0.3)
    stuck.record_step(0.5)
    try:
        jobs = lambda: {dict(ls)["job_name"] for (n, ls) in exporter.samples() if n == "npu_job_info"}  # noqa: E731
        wait_until(lambda: jobs() == {"crashed", "closed", "stuck"}, what="three jobs reported")
        wait_until(lambda: jobs() == {"stuck"}, deadline=20, what="expired jobs removed")
        found = exporter.samples()
        assert not [n for (n, ls) in found if n.startswith("npu_job_") and dict(ls).get("job_name") != "stuck"]
        assert exporter.value("cann_exporter_ingest_expired_total") == 2
        assert exporter.value("npu_job_iterations_total", job_name="stuck") == 1
    finally:
        stuck.close()


@needs_torch
def test_the_example_script(start_exporter):
    exporter = start_exporter()
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "train_with_hooks.py"),
            "--url",
            exporter.url,
            "--steps",
            "40",
            "--log-every",
            "20",
            "--job-name",
            "example",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook sent 40, dropped 0" in proc.stdout
    key = {"job_name": "example", "rank": "0"}
    exporter.wait_value("npu_job_iterations_total", 40, **key)
    phases = {dict(ls)["phase"] for (n, ls) in exporter.samples() if n == "npu_job_phase_seconds_total"}
    assert phases == {"dataloader", "h2d", "forward", "backward", "optimizer", "d2h"}  # the loop's own words


def run_example(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_EXPORTER_")}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_with_hooks.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def test_the_example_without_pytorch(start_exporter):
    """A fresh clone has no PyTorch in `make run`'s venv: the standard-library loop reports."""
    exporter = start_exporter()
    proc = run_example("--backend", "stdlib", "--url", exporter.url, "--steps", "30", "--log-every", "10", "--job-name", "plain")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done: 30 steps on a synthetic loop (no PyTorch); hook sent 30, dropped 0" in proc.stdout
    assert 'npu_job_iterations_total{job_name="plain",rank="0"} 30.0' in proc.stdout  # printed from /metrics
    assert "Where to look:" in proc.stdout
    exporter.wait_value("npu_job_iterations_total", 30, job_name="plain", rank="0")
    phases = {dict(ls)["phase"] for (n, ls) in exporter.samples() if n == "npu_job_phase_seconds_total"}
    assert phases == {"data", "h2d", "compute", "d2h"}


def test_the_example_starts_an_exporter_when_none_answers():
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    proc = run_example("--backend", "stdlib", "--url", url, "--steps", "20", "--log-every", "10")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"no cann-exporter answers at {url}; starting a temporary one" in proc.stdout
    assert re.search(r'npu_job_iterations_total\{job_name="example-mlp",rank="0"\} 20\.0', proc.stdout)


def test_token_from_a_file(start_exporter, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    exporter = start_exporter("--ingest.token-file", str(token))
    good = Monitor("with-token", url=exporter.url, token="s3cret-token", flush_interval=0.05)
    bad = Monitor("without-token", url=exporter.url, token="", flush_interval=0.05, max_backoff=0.1)
    good.record_step(0.1)
    bad.record_step(0.1)
    good.close()
    wait_until(lambda: bad.stats()["send_errors"] >= 1, what="the tokenless batch refused")
    bad.close(timeout=2)
    assert "401" in bad.stats()["last_error"] and bad.stats()["dropped"] == 1
    exporter.wait_value("npu_job_iterations_total", 1, job_name="with-token")
    assert exporter.value("npu_job_iterations_total", job_name="without-token") is None
    # The ingest's counters reach /metrics on the live parts' cadence (about a second).
    wait_until(lambda: (exporter.value("cann_exporter_ingest_rejected_total", reason="unauthorized") or 0) >= 1, what="the refusal counted")
