"""`diagnose` on the local node (the sources run once, through the simulator's subprocess path)
and on one exporter's /metrics (a local HTTP server serving known exposition text)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from exporter.simulator.scenarios import (
    DEGRADED_CRITICAL_LOGIC_ID,
    DEGRADED_FAILING_LOGIC_ID,
    DEGRADED_FAILING_SUBCOMMANDS,
    DEGRADED_HCCS_LOGIC_ID,
    UNDERUTILIZED_LOGIC_IDS,
)
from tests.support.cli import run_diagnose
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(120)


def judged(out: str, check: str = "utilization") -> dict[str, str | None]:
    return {f["subject"]: f["verdict"] for f in json.loads(out)["levels"]["macro"] if f["check"] == check}


def test_simulated_underutilized_node_is_abnormal() -> None:
    result = run_diagnose("--simulate", "underutilized", "--format", "json")
    assert result.code == 1, result.err
    verdicts = judged(result.out)
    abnormal = {s for s, v in verdicts.items() if v == "abnormal"}
    assert abnormal == {f"NPU {i} chip 0 (device {i})" for i in UNDERUTILIZED_LOGIC_IDS}
    assert set(verdicts.values()) == {"healthy", "abnormal"} and len(verdicts) == 8
    assert json.loads(result.out)["source"] == "local node (simulator: underutilized)"


def test_simulated_healthy_node_exits_0() -> None:
    result = run_diagnose("--simulate", "healthy")
    assert result.code == 0, result.err
    # 8 chips: utilization (macro), health, HCCS links and isolated pages (hardware: `-t health`,
    # `-t hccs`, `-t ecc`) each; the exporter's file descriptors; the chips expected where the
    # simulated node has an expectation (its sysfs), else unknown: never "0 missing, healthy"
    expected = re.search(r"Chips missing +0  abnormal: fewer than the 8 expected +healthy", result.out) is not None
    assert f"verdict: HEALTHY (0 abnormal, 0 warning, {33 + expected} healthy)" in result.out
    assert expected or "unknown: no expected count (8 chips listed" in result.out
    assert "one reading: utilization swing (saw-tooth), job rates and new HCCS, SIO and PCIe errors" in result.out


def test_the_degraded_chip_is_named_at_the_hardware_level() -> None:
    result = run_diagnose("--simulate", "degraded", "--format", "json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    pages = {f["subject"]: f for f in doc["levels"]["hardware"] if f["check"] == "isolated_pages"}
    assert len(pages) == 7  # the missing NPU is not listed
    abnormal = {s for s, f in pages.items() if f["verdict"] == "abnormal"}
    assert abnormal == {f"NPU {DEGRADED_CRITICAL_LOGIC_ID} chip 0 (device {DEGRADED_CRITICAL_LOGIC_ID})"}
    critical = pages[abnormal.pop()]
    assert critical["value"] > 0 and "hbm double_bit" in critical["detail"] and critical["alert"] == "NPUMemoryPagesIsolated"
    assert {f["value"] for s, f in pages.items() if f["verdict"] == "healthy"} == {0}
    advice = {a["key"]: a for a in doc["advice"]}
    assert advice["NPUMemoryPagesIsolated"]["runbooks"] == ["docs/runbooks.md#npumemorypagesisolated"]


def test_degraded_node_names_every_hardware_fault_the_alerts_page_on(tmp_path: Path) -> None:
    """Health, fault level and codes, the missing chip (against npu_smi.expected_devices), the failing card
    reads with their reason, the network probe and the dark lane; the Critical chip's 0% is a
    consequence with hardware advice, never a pipeline lever."""
    (tmp_path / "c.yaml").write_text("npu_smi: {expected_devices: 8}\n")
    result = run_diagnose("--simulate", "degraded", "--config", str(tmp_path / "c.yaml"), "--format", "json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    critical = f"NPU {DEGRADED_CRITICAL_LOGIC_ID} chip 0 (device {DEGRADED_CRITICAL_LOGIC_ID})"
    off = {(f["subject"], f["check"]): f for f in doc["levels"]["hardware"] if f["verdict"] in ("warning", "abnormal")}
    health = off[(critical, "health")]
    # The SeparateNPU code makes the isolation alert the page, and the level's action the advice.
    assert health["verdict"] == "abnormal" and health["alert"] == "NPUNeedsIsolation"
    assert "Critical" in health["detail"] and "80E18005 (RestartNPU)" in health["detail"] and "80CB8009" in health["detail"]
    assert "fault level SeparateNPU: take the chip out of service now" in health["detail"]
    missing = off[("this node: chips", "missing")]
    assert (missing["value"], missing["verdict"], missing["alert"]) == (1, "abnormal", "NPUMissing")
    assert (
        missing["detail"]
        == '7 of 8 chips listed by npu-smi; expected from npu_expected_devices{source="config"} (npu_smi.expected_devices)'
    )
    (failing,) = [f for (s, check), f in off.items() if check == "read_failure"]
    assert "dcmi_init_failed" in failing["title"] and failing["alert"] == "CANNExporterSourceFailing"
    assert failing["detail"] == ", ".join(f"{c} -i {DEGRADED_FAILING_LOGIC_ID}" for c in sorted(DEGRADED_FAILING_SUBCOMMANDS))
    assert off[(critical, "network_health")]["alert"] == "NPUNetworkUnhealthy"
    # logic id 3's HCCS link 2 is NOK with half its lanes: the link page, with the link named
    hccs = off[(f"NPU {DEGRADED_HCCS_LOGIC_ID} chip 0 (device {DEGRADED_HCCS_LOGIC_ID})", "hccs_link")]
    assert (hccs["title"], hccs["verdict"], hccs["alert"]) == ("HCCS links NOK", "abnormal", "NPUHCCSLinkDown")
    assert "link 2: 2 of 4 lanes (1100, 112 Gbit/s)" in hccs["detail"]
    assert [s for (s, check) in off if check == "hccs_link"] == [f"NPU {DEGRADED_HCCS_LOGIC_ID} chip 0 (device {DEGRADED_HCCS_LOGIC_ID})"]
    assert off[(critical, "optical_power")]["alert"] == "NPUOpticalPowerOutOfRange"
    # the chip's 0% is not judged, and no pipeline lever is offered for it
    (util,) = [f for f in doc["levels"]["macro"] if f["subject"] == critical and f["check"] == "utilization"]
    assert util["verdict"] is None and "consequence of the hardware fault" in util["detail"]
    advice = {a["key"]: a for a in doc["advice"]}
    assert "device_utilization" not in advice
    assert any("npu-smi info -t health" in lever for lever in advice["NPUNeedsIsolation"]["levers"])
    assert any("drain" in lever for lever in advice["NPUNeedsIsolation"]["levers"])
    levers = " ".join(lever for a in doc["advice"] for lever in a["levers"])
    assert "double buffer" not in levers.lower() and "numa" not in levers.lower()


def test_idle_node_is_not_judged_on_unused_chips() -> None:
    result = run_diagnose("--simulate", "idle", "--simulate.model", "310p-duo", "--format", "json")
    assert result.code == 0
    assert set(judged(result.out).values()) == {None}


def test_npu_smi_missing_exits_2(tmp_path: Path) -> None:
    result = run_diagnose("--npu-smi", str(tmp_path / "npu-smi"))
    assert (result.code, result.out) == (2, "")
    assert f"no NPU chip could be read through {tmp_path / 'npu-smi'}" in result.err and "Traceback" not in result.err


def test_bad_config_exits_2(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("npu_smi: {timeout: never}\n")
    result = run_diagnose("--config", str(tmp_path / "c.yaml"))
    assert result.code == 2 and "configuration error" in result.err and "npu_smi.timeout" in result.err


# --- one exporter's /metrics ------------------------------------------------------------------------

CHIPS = """# TYPE npu_aicore_utilization_ratio gauge
npu_aicore_utilization_ratio{npu="0",chip="0",device="0"} 0.5
npu_aicore_utilization_ratio{npu="1",chip="0",device="1"} 0.95
npu_aicore_utilization_ratio{npu="2",chip="0",device="2"} 0.0
# TYPE npu_process_memory_bytes gauge
npu_process_memory_bytes{npu="0",chip="0",device="0",pid="1",process="python"} 1e9
npu_process_memory_bytes{npu="1",chip="0",device="1",pid="2",process="python"} 1e9
# TYPE npu_up gauge
npu_up{npu="0",chip="0",device="0"} 1
"""


def job_text(iterations: float, at: float, mfu: float | None = None) -> str:
    """A rank that runs 0.2 s iterations 80% of the time; counters after ``iterations``; its
    model FLOPs utilization when given."""
    busy = iterations * 0.2
    served = (
        ""
        if mfu is None
        else f'# TYPE npu_job_model_flops_utilization_ratio gauge\nnpu_job_model_flops_utilization_ratio{{job_name="llm",rank="0"}} {mfu}\n'
    )
    return (
        served
        + f"""# TYPE npu_job_iteration_duration_seconds histogram
npu_job_iteration_duration_seconds_bucket{{job_name="llm",rank="0",le="+Inf"}} {iterations}
npu_job_iteration_duration_seconds_sum{{job_name="llm",rank="0"}} {busy}
npu_job_iteration_duration_seconds_count{{job_name="llm",rank="0"}} {iterations}
# TYPE npu_job_samples_total counter
npu_job_samples_total{{job_name="llm",rank="0"}} {iterations * 8}
# TYPE npu_job_phase_seconds_total counter
npu_job_phase_seconds_total{{job_name="llm",rank="0",phase="h2d"}} {busy * 0.4}
npu_job_phase_seconds_total{{job_name="llm",rank="0",phase="compute"}} {busy * 0.6}
# TYPE npu_job_last_iteration_timestamp_seconds gauge
npu_job_last_iteration_timestamp_seconds{{job_name="llm",rank="0"}} {at}
# TYPE npu_profile_max_operator_ratio gauge
npu_profile_max_operator_ratio{{job_name="llm",rank="0"}} 0.2
# TYPE npu_profile_operator_time_ratio gauge
npu_profile_operator_time_ratio{{job_name="llm",rank="0",op_type="MatMul",position="1"}} 0.2
"""
    )


class Server:
    def __init__(self, bodies: list[tuple[int, str]]) -> None:
        self.bodies, self.calls = bodies, 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = server.bodies[min(server.calls, len(server.bodies) - 1)]
                server.calls += 1
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[type[Server]]:
    yield Server


def test_metrics_url_one_scrape(serve: type[Server]) -> None:
    import time

    with serve([(200, CHIPS + job_text(1000, time.time() - 5, mfu=0.2))]) as server:
        result = run_diagnose("--metrics-url", server.url, "--format", "json")
    assert result.code == 1, result.err
    doc = json.loads(result.out)
    found = {(f["subject"], f["check"]): f for level in doc["levels"].values() for f in level}
    assert found[("NPU 0 chip 0 (device 0)", "utilization")]["verdict"] == "abnormal"
    assert found[("NPU 1 chip 0 (device 1)", "utilization")]["verdict"] == "healthy"
    assert found[("NPU 2 chip 0 (device 2)", "utilization")]["verdict"] is None  # no process on it
    job = "job llm rank 0"
    assert found[(job, "iteration_time")]["value"] == pytest.approx(0.2)
    assert found[(job, "memcpy_share")]["value"] == pytest.approx(0.4) and found[(job, "memcpy_share")]["verdict"] == "abnormal"
    assert found[(job, "stall")]["verdict"] == "healthy"
    assert (job, "idle_gaps") not in found  # one scrape: no rates
    assert (found[(job, "mfu")]["value"], found[(job, "mfu")]["verdict"]) == (pytest.approx(0.2), "warning")
    advice = {a["key"]: a for a in doc["advice"]}["model_flops_utilization"]
    assert "job llm rank 0" in advice["subjects"] and any("fused kernels" in lever for lever in advice["levers"])
    assert not [n for n in doc["notes"] if "model FLOPs utilization" in n]
    assert found[("profile of job llm rank 0", "profile.max_operator_ratio")]["verdict"] == "healthy"


def test_metrics_url_rates_from_two_scrapes(serve: type[Server]) -> None:
    import time

    now = time.time()
    # 50 iterations of 0.2 s between scrapes that are ~0.5 s apart: more busy time than wall time is
    # impossible in reality, so only the ratios are checked, not the absolute rate.
    with serve([(200, CHIPS + job_text(1000, now, mfu=0.5)), (200, CHIPS + job_text(1050, now, mfu=0.4))]) as server:
        result = run_diagnose("--metrics-url", server.url, "--samples", "2", "--interval", "0.5", "--format", "json")
    doc = json.loads(result.out)
    found = {(f["subject"], f["check"]): f for level in doc["levels"].values() for f in level}
    assert found[("job llm rank 0", "iteration_time")]["value"] == pytest.approx(0.2)
    assert found[("job llm rank 0", "phase.h2d")]["value"] == pytest.approx(0.4)
    assert found[("job llm rank 0", "iteration_rate")]["value"] > 0
    assert doc["window"].startswith("2 samples over")
    mfu = found[("job llm rank 0", "mfu")]  # the mean of the two readings (each the exporter's last 60 s)
    assert mfu["value"] == pytest.approx(0.45) and mfu["verdict"] is None and "too young to judge" in mfu["detail"]


def test_metrics_url_without_mfu_says_so_once(serve: type[Server]) -> None:
    import time

    with serve([(200, CHIPS + job_text(1000, time.time() - 5))]) as server:
        result = run_diagnose("--metrics-url", server.url, "--format", "json")
    doc = json.loads(result.out)
    assert not [f for level in doc["levels"].values() for f in level if f["check"] == "mfu"]
    assert [n for n in doc["notes"] if "model FLOPs utilization" in n] == [
        "no model FLOPs utilization for job llm rank 0: the loop declares no FLOPs (flops_per_step=, step(flops=), "
        "TorchMonitor(measure_flops=True)) or the exporter has no peak FLOP/s for its chip at its precision "
        "(npu_peak_flops_per_second; npu_smi.peak_flops)"
    ]
    assert "model_flops_utilization" not in {a["key"] for a in doc["advice"]}


@pytest.mark.parametrize(
    "status,body,message",
    [
        (404, "not found", "answered HTTP 404"),
        (200, "<html>{ not metrics", "not Prometheus exposition text"),
        (200, "# TYPE up gauge\nup 1\n", "no NPU data"),
    ],
)
def test_metrics_url_bad_answers_exit_2(serve: type[Server], status: int, body: str, message: str) -> None:
    with serve([(status, body)]) as server:
        result = run_diagnose("--metrics-url", server.url)
    assert (result.code, result.out) == (2, "")
    assert message in result.err and "Traceback" not in result.err


def test_metrics_url_unreachable_exits_2() -> None:
    result = run_diagnose("--metrics-url", f"http://127.0.0.1:{free_port()}/metrics", "--timeout", "2s")
    assert result.code == 2 and "cannot reach http://127.0.0.1:" in result.err


# --- a job's ranks: the straggler, the data phase, a CPU job ------------------------------------------


def ranks_text(device: str | None = "3") -> str:
    """What the exporter serves for job dp: 4 ranks of 0.1 s iterations; ranks 0-2 wait 40 ms of it
    in communication, rank 2's data phase takes 35%, rank 3 waits only 4 ms (the straggler)."""
    from exporter.jobs.collector import JobCollector
    from exporter.jobs.store import IngestStore
    from exporter.jobs.validate import Batch, Step
    from tests.support.exposition import exposition

    store = IngestStore()
    for rank in range(4):
        comm = 0.004 if rank == 3 else 0.04
        data = 0.035 if rank == 2 else 0.005
        phases = (("communication", comm), ("data", data), ("compute", 0.1 - comm - data))
        dev = None if device is None else (device if device == "" else str(rank))
        batch = Batch("dp", rank, 4, dev or "", "pytorch", "7", 0, False, None, None, (Step(0.1, None, 32, phases),) * 50)
        store.accept(batch)
    return exposition(JobCollector(), store.part())


def test_metrics_url_names_the_straggler_with_its_rank_node_and_chip(serve: type[Server]) -> None:
    with serve([(200, CHIPS + ranks_text())]) as server:
        result = run_diagnose("--metrics-url", server.url, "--format", "json")
        text = run_diagnose("--metrics-url", server.url)
    doc = json.loads(result.out)
    stragglers = [f for level in doc["levels"].values() for f in level if f["check"] == "straggler"]
    assert len(stragglers) == 1, stragglers
    finding = stragglers[0]
    assert finding["subject"] == "job dp rank 3, device 3" and finding["verdict"] == "warning"
    assert "straggler" in finding["detail"] and "rank 3" in finding["detail"] and "device 3" in finding["detail"]
    assert finding["value"] == pytest.approx(0.096 / 0.06)
    assert "straggler" in text.out and "rank 3" in text.out
    data = {f["subject"]: f for level in doc["levels"].values() for f in level if f["check"] == "phase.data"}
    assert data["job dp rank 2"]["verdict"] != "healthy" and data["job dp rank 0"]["verdict"] == "healthy"
    assert "idle" in data["job dp rank 2"]["detail"]  # the bounds and where they come from


def test_a_cpu_job_gets_no_npu_advice(serve: type[Server]) -> None:
    profile = """# TYPE npu_profile_max_operator_ratio gauge
npu_profile_max_operator_ratio{job_name="dp",rank="0"} 0.9
# TYPE npu_profile_top3_operator_ratio gauge
npu_profile_top3_operator_ratio{job_name="dp",rank="0"} 0.95
"""
    with serve([(200, CHIPS + ranks_text(device="") + profile)]) as server:
        cpu = run_diagnose("--metrics-url", server.url)
        result = run_diagnose("--metrics-url", server.url, "--format", "json")
    doc = json.loads(result.out)
    found = {(f["subject"], f["check"]): f for level in doc["levels"].values() for f in level}
    assert found[("profile of job dp rank 0", "profile.max_operator_ratio")]["verdict"] is None
    assert "CPU job" in found[("profile of job dp rank 0", "profile.max_operator_ratio")]["detail"]
    assert "operator fusion" not in cpu.out and "TBE" not in cpu.out, cpu.out
    with serve([(200, CHIPS + ranks_text() + profile)]) as server:
        npu = run_diagnose("--metrics-url", server.url)
    assert "operator fusion" in npu.out and "TBE" in npu.out  # the same profile on a chip gets the NPU levers


def checkpointing_job_text() -> str:
    """What the exporter serves for a scripted job posted to the real ingest with its own clock:
    its process started 10 s before its first step, then 100 steps of 1 s (5% of each in the data
    phase) with a 10 s checkpoint saved between steps after every 25th: 150 s of wall time, 95 s
    of goodput, 40 s of checkpoint_save, 10 s of startup, 5 s of data_wait."""
    import time

    from exporter.jobs.collector import JobCollector
    from exporter.jobs.store import IngestStore
    from exporter.jobs.validate import Batch, Outside, Step
    from tests.support.exposition import exposition

    started = time.time() - 300
    steps, outside, clock = [], [], started + 10.0
    for index in range(1, 101):
        clock += 1.0
        steps.append(Step(1.0, clock, 8, (("data", 0.05), ("compute", 0.95)), index=index))
        if index % 25 == 0:
            clock += 10.0
            outside.append(Outside(clock, (("save_checkpoint", 10.0),)))
    store = IngestStore()
    store.accept(Batch("ckpt", 0, 1, "3", "pytorch", "7", 0, False, None, None, tuple(steps), started=started, outside=tuple(outside)))
    return exposition(JobCollector(), store.part())


def test_metrics_url_names_the_largest_badput_with_its_lever(serve: type[Server]) -> None:
    with serve([(200, CHIPS + checkpointing_job_text())]) as server:
        result = run_diagnose("--metrics-url", server.url, "--format", "json")
        text = run_diagnose("--metrics-url", server.url)
    assert result.code == 1, result.err
    found = {(f["subject"], f["check"]): f for level in json.loads(result.out)["levels"].values() for f in level}
    good = found[("job ckpt rank 0", "goodput")]
    assert good["value"] == pytest.approx(95 / 150) and (good["verdict"], good["alert"]) == ("warning", "NPUJobGoodputLow")
    bad = found[("job ckpt rank 0", "badput")]
    assert bad["title"] == "Largest badput: checkpoint_save" and bad["value"] == pytest.approx(40 / 150)
    assert bad["verdict"] == "abnormal" and bad["detail"].endswith("lever: checkpoint less often, or asynchronously")
    assert "Largest badput: checkpoint_save" in text.out and "checkpoint less often, or asynchronously" in text.out
