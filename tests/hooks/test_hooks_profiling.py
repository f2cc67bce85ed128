"""Scheduled profiling windows of the PyTorch adapter, end to end: a real torch (CPU) loop whose
time is one known operator, or the NPU path through a stand-in torch_npu, a real exporter, and
the window's summary on /metrics as npu_profile_* (fed on to NPUHotOperator's promtool test).
Also: skipped windows, failures that disable profiling, temporary files, fork safety."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from exporter.hooks import Monitor  # noqa: E402
from exporter.hooks.profiling import DIR_PREFIX, Profiling, remove_stale  # noqa: E402
from exporter.hooks.torch import TorchMonitor  # noqa: E402
from exporter.hooks.torch_profiler import TorchProfilerBackend  # noqa: E402
from exporter.profiles.window import summarise_window  # noqa: E402
from exporter.thresholds.table import load_thresholds  # noqa: E402
from tests.support.exposition import value  # noqa: E402
from tests.support.hooks import run_script, wait_until  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.support.profile_exports import PT_LEVEL1, build  # noqa: E402
from tests.support.tools import tool  # noqa: E402

STANDIN = ROOT / "tests" / "support" / "standin_torch_npu"

# A loop whose time is large matrix multiplications (aten::mm), until one window was accepted;
# large enough (tens of ms each) that a preemption inside a cheap operator never outweighs them.
LOOP = """
import json, os, sys, time
{prelude}
import torch
from exporter.hooks.torch import TorchMonitor
mon = TorchMonitor(job_name={job!r}, profile_every=0.2, profile_steps=3)
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    with mon.step(samples=4):
        with mon.phase("compute"):
            for _ in range(4):
                c = a @ b
    s = mon.stats()
    if s["profile_windows"] >= 1 and not s["profile_in_window"]:
        break
mon.close(timeout=30)  # the last batch carries the window's overhead: a loaded machine's exporter may be slow
print(json.dumps({{"kind": mon.kind, **{{k: v for k, v in mon.stats().items() if k.startswith(("profil", "sent", "dropped", "send_errors", "last_failure"))}}}}))
"""


def train(exporter_url: str, tmp: Path, job: str, prelude: str = "", extra_path: Path | None = None) -> dict:
    tmp.mkdir(exist_ok=True)
    env = {"CANN_EXPORTER_URL": exporter_url, "TMPDIR": str(tmp)}
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}:{ROOT}"
    result = run_script(LOOP.format(prelude=prelude, job=job), env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def served(exporter, metric: str, job_name: str) -> dict:
    """/metrics once ``metric`` of ``job_name`` is on it (the summary arrives after the window)."""

    def check() -> dict | None:
        found = exporter.samples()
        return found if value(found, metric, job_name=job_name) is not None else None

    return wait_until(check, deadline=60, what=f"{metric} of {job_name} on /metrics")


def leftovers(tmp: Path) -> list[str]:
    return [p.name for p in tmp.iterdir() if p.name.startswith(DIR_PREFIX)]


def test_a_cpu_window_shows_the_hot_operator(start_exporter, tmp_path):
    exporter = start_exporter()
    stats = train(exporter.url, tmp_path / "tmp", "matmul")
    assert stats["kind"] == "cpu" and stats["profile_windows"] >= 1 and stats["profiling_disabled"] is None
    hot = load_thresholds().alert("NPUHotOperator").threshold
    found = served(exporter, "npu_profile_max_operator_ratio", "matmul")
    assert value(found, "npu_profile_max_operator_ratio", job_name="matmul", rank="0") > hot
    assert value(found, "npu_profile_operator_time_ratio", job_name="matmul", position="1", op_type="aten::mm") > hot
    assert value(found, "npu_profile_step_duration_seconds", job_name="matmul") > 0
    for absent in ("npu_profile_compute_ratio", "npu_profile_idle_ratio", "npu_profile_memcpy_ratio"):  # no device on the CPU
        assert value(found, absent, job_name="matmul") is None, absent
    assert value(found, "cann_exporter_ingest_profiles_total") >= 1
    assert leftovers(tmp_path / "tmp") == []
    assert "USDT" not in stats["stderr"] and "profiler_st" not in stats["stderr"]  # Kineto's start/stop lines, muted
    # What the windows cost the training thread (profiler.stop() alone is milliseconds) is served per job.
    assert stats["profiling_overhead_seconds"] > 0
    expected = pytest.approx(stats["profiling_overhead_seconds"], abs=1e-5)

    def overhead_of(found: dict) -> float | None:
        return value(found, "npu_job_profiling_overhead_seconds_total", job_name="matmul", rank="0")

    # A posted summary is published at once, steps with the sampler's next round: the last batch,
    # which carries the window's whole overhead, may reach /metrics a round after the summary.
    def settled() -> dict | None:
        latest = exporter.samples()
        return latest if overhead_of(latest) == expected else None

    if overhead_of(found) != expected:
        found = wait_until(settled, deadline=60, what="the window's overhead on /metrics")
    assert overhead_of(found) == expected, stats
    hot_operator_fires_on(found, "matmul", tmp_path)


def hot_operator_fires_on(found: dict, job_name: str, tmp_path: Path) -> None:
    """NPUHotOperator's promtool test, its input series the job's series from this /metrics."""
    series = [
        {
            "series": "{}{{{}}}".format(
                name, ", ".join(f'{k}="{v}"' for k, v in sorted({**dict(labels), "job": "npu", "instance": "node-a:9435"}.items()))
            ),
            "values": f"{v!r}x30",
        }
        for (name, labels), v in sorted(found.items(), key=lambda item: item[0][0])
        if dict(labels).get("job_name") == job_name and name.startswith(("npu_profile_", "npu_job_info"))
    ]
    ratio = value(found, "npu_profile_max_operator_ratio", job_name=job_name)
    op_type = next(
        dict(ls)["op_type"]
        for (n, ls), _ in found.items()
        if n == "npu_profile_operator_time_ratio" and dict(ls).get("position") == "1" and dict(ls)["job_name"] == job_name
    )
    where = f"job {job_name} rank 0 on node-a:9435"
    test = {
        "rule_files": [str(ROOT / "alerts" / "cann-exporter.alerts.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "NPUHotOperator", "exp_alerts": []},
                    {
                        "eval_time": "10m",
                        "alertname": "NPUHotOperator",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    "job": "npu",
                                    "instance": "node-a:9435",
                                    "job_name": job_name,
                                    "rank": "0",
                                    "op_type": op_type,
                                },
                                "exp_annotations": {
                                    "summary": f"One operator type dominates the device time of {where}",
                                    "description": f"In the latest profile of {where}, operator type {op_type} takes "
                                    f"{ratio * 100:.4g}% of device kernel time (above 70%).",
                                    "runbook_url": "docs/runbooks.md#npuhotoperator",
                                },
                            }
                        ],
                    },
                ],
            }
        ],
    }
    path = tmp_path / "hot-operator.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = subprocess.run([tool("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_npu_path_through_a_stand_in_torch_npu(start_exporter, tmp_path):
    """A stand-in torch_npu (tests/support/standin_torch_npu, not Huawei's) writes real torch_npu
    samples as its export; the hooks' summary reads them with the watched exports' code."""
    exporter = start_exporter()
    stats = train(exporter.url, tmp_path / "tmp", "npu-job", prelude="import torch_npu\nassert torch_npu.STANDIN", extra_path=STANDIN)
    assert stats["kind"] == "npu" and stats["profile_windows"] >= 1, stats
    expected = summarise_window(build(tmp_path / "ref" / "x_1_2_ascend_pt", PT_LEVEL1).parent, "npu", "npu-job", 0)
    found = served(exporter, "npu_profile_compute_ratio", "npu-job")
    for name, field in (
        ("npu_profile_compute_ratio", "compute_ratio"),
        ("npu_profile_idle_ratio", "idle_ratio"),
        ("npu_profile_memcpy_ratio", "memcpy_ratio"),
        ("npu_profile_communication_ratio", "communication_ratio"),
        ("npu_profile_framework_overhead_ratio", "framework_overhead_ratio"),
        ("npu_profile_max_operator_ratio", "max_operator_ratio"),
        ("npu_profile_step_duration_seconds", "step_duration_seconds"),
    ):
        assert value(found, name, job_name="npu-job", rank="0") == pytest.approx(getattr(expected, field)), name
    top = expected.top_operators[0]
    assert value(found, "npu_profile_operator_time_ratio", job_name="npu-job", position="1", op_type=top.op_type) == pytest.approx(
        top.ratio
    )
    assert leftovers(tmp_path / "tmp") == []


class _SlowExport(TorchProfilerBackend):
    """torch.profiler whose export waits for the test: the summary stays in flight."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__(cuda=False)
        self.release = release

    def start(self, directory: str):
        session = super().start(directory)
        real_export = session.export

        def export() -> None:
            self.release.wait(30)
            real_export()

        session.export = export
        return session


def run_steps(profiling: Profiling, n: int, pause: float = 0.0) -> None:
    a = torch.randn(64, 64)
    for _ in range(n):
        profiling.before_step()
        a @ a
        profiling.after_step()
        if pause:
            time.sleep(pause)


def test_a_window_due_while_the_summary_is_made_is_skipped_and_counted(sink, tmp_path):
    release = threading.Event()
    mon = Monitor("skip", url=sink.url)
    profiling = Profiling(_SlowExport(release), lambda: mon.identity, sink.url, None, every=0.01, steps=1, workdir=str(tmp_path))
    run_steps(profiling, 1, pause=0.02)  # the first window opens ...
    run_steps(profiling, 1, pause=0.02)  # ... and closes: its summary waits for `release`
    run_steps(profiling, 20, pause=0.02)  # windows come due meanwhile: skipped
    assert profiling.skipped >= 3 and profiling.windows == 0
    skipped = profiling.skipped
    release.set()
    wait_until(lambda: sink.profiles, deadline=60, what="the summary posted")
    assert sink.profiles[0]["skipped"] == skipped and sink.profiles[0]["job_name"] == "skip"
    profiling.close()
    mon.close()
    assert leftovers(tmp_path) == []


class _NoProfiler:
    name = "cpu"

    def start(self, directory: str):
        raise PermissionError(13, "Permission denied", "/dev/kineto")


class _NoTrace(TorchProfilerBackend):
    """A profiler whose export writes nothing: the summary fails."""

    def start(self, directory: str):
        session = super().start(directory)
        session.export = lambda: None
        return session


@pytest.mark.parametrize("backend", [_NoProfiler(), _NoTrace(cuda=False)], ids=["profiler_refused", "summary_failed"])
def test_a_failure_disables_profiling_with_one_warning_and_the_loop_goes_on(sink, tmp_path, caplog, backend):
    mon = Monitor("fails", url=sink.url)
    profiling = Profiling(backend, lambda: mon.identity, sink.url, None, every=0.01, steps=1, workdir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="exporter.hooks"):
        for _ in range(30):
            profiling.before_step()
            with mon.step(samples=1):
                pass
            profiling.after_step()
            time.sleep(0.01)
        wait_until(lambda: profiling.disabled and not profiling._busy, deadline=60, what="profiling disabled")
        run_steps(profiling, 10, pause=0.01)
    warnings = [r for r in caplog.records if "profiling disabled" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert profiling.windows == 0 and not sink.profiles
    mon.flush()
    assert len(sink.steps(job_name="fails")) == 30  # steps still reported
    assert leftovers(tmp_path) == []
    mon.close()


def test_off_by_default_and_no_profiler_touched(monkeypatch):
    monkeypatch.delenv("CANN_EXPORTER_PROFILE_EVERY", raising=False)
    mon = TorchMonitor(job_name="off", enabled=False)
    assert mon._profiling is None
    assert "profile_windows" not in mon.stats()
    monkeypatch.setenv("CANN_EXPORTER_PROFILE_EVERY", "10m")
    monkeypatch.setenv("CANN_EXPORTER_PROFILE_STEPS", "7")
    mon = TorchMonitor(job_name="env", url="http://127.0.0.1:9")
    assert mon._profiling is not None and mon._profiling.every == 600 and mon._profiling.steps == 7
    mon.close(timeout=0.1)


def test_stale_window_directories_of_dead_processes_are_removed(tmp_path):
    dead = 2**22 + 12345  # above the largest pid_max: no such process
    gone, alive = tmp_path / f"{DIR_PREFIX}{dead}-abc", tmp_path / f"{DIR_PREFIX}1-def"  # pid 1 is alive
    for path in (gone, alive):
        path.mkdir()
    remove_stale(str(tmp_path))  # just written: may be another namespace's window
    assert gone.exists() and alive.exists()
    remove_stale(str(tmp_path), now=time.time() + 7200)  # untouched for two hours
    assert not gone.exists() and alive.exists()


FORK = """
import os, json, time
import torch
from exporter.hooks.torch import TorchMonitor
mon = TorchMonitor(job_name="fork", profile_every=0.01, profile_steps=1000)
time.sleep(0.05)
with mon.step():
    pass
assert mon.stats()["profile_in_window"]
pid = os.fork()
if pid == 0:
    s = mon.stats()
    ok = not s["profile_in_window"] and mon._profiling._thread is None and not mon._profiling._busy
    with mon.step():   # no window is due yet in the child
        pass
    os._exit(0 if ok and not mon.stats()["profile_in_window"] else 3)
_, status = os.waitpid(pid, 0)
mon.close(timeout=1)
print(json.dumps({"child": os.waitstatus_to_exitcode(status), "left": [n for n in os.listdir(os.environ["TMPDIR"]) if n.startswith("cann-exporter-profile-")]}))
"""


def test_a_fork_child_starts_without_a_window(tmp_path):
    result = run_script(FORK, env={"CANN_EXPORTER_URL": "http://127.0.0.1:9", "TMPDIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"child": 0, "left": []}


EXIT_MID_SUMMARY = """
import os, time
import torch
from exporter.hooks.torch import TorchMonitor
mon = TorchMonitor(job_name="exit", profile_every=0.01, profile_steps=1)
time.sleep(0.05)
for _ in range(2):
    with mon.step():
        torch.randn(64, 64) @ torch.randn(64, 64)
assert mon._profiling._busy   # the summary is being made; the process ends without close()
"""


def test_exiting_while_a_summary_is_made_leaves_no_files(tmp_path):
    result = run_script(EXIT_MID_SUMMARY, env={"CANN_EXPORTER_URL": "http://127.0.0.1:9", "TMPDIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert leftovers(tmp_path) == []


class _CountingDevice:
    """A device whose events finish at once; counts every synchronize."""

    def __init__(self) -> None:
        self.synchronize_calls = 0
        device = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = 0.0

            def record(self, stream=None) -> None:
                self.at = time.perf_counter()

            def query(self) -> bool:
                return True

            def elapsed_time(self, end) -> float:
                return (end.at - self.at) * 1000

            def synchronize(self) -> None:
                device.synchronize_calls += 1

        self.Event = Event

    def synchronize(self) -> None:
        self.synchronize_calls += 1

    def memory_allocated(self) -> int:
        return 0

    def max_memory_allocated(self) -> int:
        return 0


def test_ordinary_steps_never_synchronize(sink):
    device = _CountingDevice()
    mon = TorchMonitor(job_name="sync", backend=device, url=sink.url, profile_every=3600)
    for _ in range(50):
        with mon.step(samples=1):
            with mon.phase("compute"):
                pass
        mon.begin_step()
        mon.end_step(1)
    assert device.synchronize_calls == 0 and mon.stats()["profile_in_window"] is False
    mon.close(timeout=1)
