"""`diagnose --prometheus` against a real Prometheus holding known history (history.py): the
verdicts, the numbers and the exit codes are the known ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import history as h
from tests.support.cli import run_diagnose
from tests.support.ports import free_port
from tests.support.prometheus import Prometheus

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def rows(out: str) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads(out)
    return {(f["subject"], f["check"]): f for level in doc["levels"].values() for f in level}


def diagnose_json(prom: Prometheus, *extra: str) -> tuple[int, dict[str, Any], dict[tuple[str, str], dict[str, Any]]]:
    result = run_diagnose("--prometheus", prom.url, "--end", str(prom.now), "--format", "json", *extra)
    assert result.err == ""
    return result.code, json.loads(result.out), rows(result.out)


def chip(node: str, npu: int) -> str:
    return f"node-{node}:9435 NPU {npu} chip 0 (device {npu})"


def test_whole_cluster_is_abnormal_with_the_known_verdicts(prometheus: Prometheus) -> None:
    code, doc, found = diagnose_json(prometheus)
    assert code == 1 and doc["verdict"] == "abnormal" and doc["exit_code"] == 1
    # macro: utilization level per chip
    for npu, util in enumerate(h.NODE_A_UTIL):
        assert found[(chip("a", npu), "utilization")]["value"] == pytest.approx(util)
        assert found[(chip("a", npu), "utilization")]["verdict"] == "healthy"
    for npu in range(4):
        row = found[(chip("b", npu), "utilization")]
        assert (row["value"], row["verdict"]) == (pytest.approx(h.NODE_B_UTIL), "abnormal")
        assert row["alert"] == "NPULowUtilization" and row["bounds"] == "healthy > 85%, abnormal < 60%"
    idle = found[(chip("c", 0), "utilization")]
    assert idle["value"] == 0 and idle["verdict"] is None and "not in use" in idle["detail"]
    assert (chip("c", 0), "stability") not in found
    # the saw-tooth chip: a warning level, an abnormal swing
    saw = found[(chip("c", 1), "utilization")]
    assert saw["value"] == pytest.approx(sum(h.SAW) / 2, abs=0.01) and saw["verdict"] == "warning"
    swing = found[(chip("c", 1), "stability")]
    assert swing["value"] == pytest.approx((h.SAW[1] - h.SAW[0]) / 2, abs=0.01)
    assert (swing["verdict"], swing["alert"]) == ("abnormal", "NPUUtilizationUnstable")
    assert found[(chip("a", 0), "stability")]["verdict"] == "healthy"
    # macro: idle gaps between iterations and stalls
    assert found[("job slow rank 0 on node-b:9435", "idle_gaps")]["value"] == pytest.approx(1 - h.SLOW.busy)
    assert found[("job slow rank 0 on node-b:9435", "idle_gaps")]["verdict"] == "warning"
    stall = found[("job stuck rank 0 on node-c:9435", "stall")]
    assert stall["value"] == pytest.approx(h.STALL_AGO) and stall["verdict"] == "abnormal"
    assert found[("job bert rank 0 on node-a:9435", "stall")]["verdict"] == "healthy"
    # macro: model FLOPs utilization against the table's band; stuck declares no FLOPs: one note, no row
    mfu = found[("job slow rank 0 on node-b:9435", "mfu")]
    assert (mfu["value"], mfu["verdict"], mfu["bounds"]) == (pytest.approx(h.SLOW.mfu), "warning", "healthy > 35%, commonly up to 60%")
    assert found[("job bert rank 1 on node-a:9435", "mfu")]["verdict"] == "healthy"
    assert ("job stuck rank 0 on node-c:9435", "mfu") not in found
    assert [n for n in doc["notes"] if "model FLOPs utilization" in n] == [
        "no model FLOPs utilization for job stuck rank 0 on node-c:9435: the loop declares no FLOPs (flops_per_step=, "
        "step(flops=), TorchMonitor(measure_flops=True)) or the exporter has no peak FLOP/s for its chip at its precision "
        "(npu_peak_flops_per_second; npu_smi.peak_flops)"
    ]
    assert any("larger micro-batch" in lever for lever in {a["key"]: a for a in doc["advice"]}["model_flops_utilization"]["levers"])
    # meso: the slow job's memory copies and framework overhead
    slow = "job slow rank 0 on node-b:9435"
    assert found[(slow, "memcpy_share")]["value"] == pytest.approx(h.SLOW.phases["h2d"] + h.SLOW.phases["d2h"])
    assert found[(slow, "memcpy_share")]["verdict"] == "abnormal"
    assert (found[(slow, "framework_share")]["verdict"], found[(slow, "framework_share")]["value"]) == (
        "warning",
        pytest.approx(h.SLOW.phases["framework"]),
    )
    # micro: the slow job's hot operator, from its npu_profile_* series
    hot = found[("profile of job slow rank 0 (node-b:9435)", "profile.max_operator_ratio")]
    assert (hot["value"], hot["verdict"], hot["alert"]) == (pytest.approx(0.80), "abnormal", "NPUHotOperator")
    ops = [f for f in doc["levels"]["micro"] if f["check"] == "operator" and "slow" in f["subject"]]
    assert next((f["title"], f["value"]) for f in ops) == ("operator #1 TransData", pytest.approx(0.80))
    # hardware: isolated pages at the window's end, new ones within it (NPUMemoryPagesIsolated's tiers)
    pages = {s: f for (s, check), f in found.items() if check == "isolated_pages"}
    assert set(pages) == {chip(node, npu) for node in "ab" for npu in range(4)}  # node-c reports none
    assert (pages[chip("a", 3)]["value"], pages[chip("a", 3)]["verdict"]) == (2, "healthy")  # old pages only
    assert (pages[chip("b", 0)]["value"], pages[chip("b", 0)]["verdict"]) == (1, "abnormal")  # a double-bit page
    assert pages[chip("b", 0)]["detail"] == "hbm double_bit 1" and pages[chip("b", 0)]["alert"] == "NPUMemoryPagesIsolated"
    assert (pages[chip("b", 1)]["value"], pages[chip("b", 1)]["verdict"]) == (2, "warning")  # one new in the hour
    assert pages[chip("b", 1)]["detail"] == "hbm single_bit 2; 1 new in the window"
    assert {pages[chip("a", n)]["verdict"] for n in range(3)} == {"healthy"}
    assert doc["levels"]["hardware"] and list(doc["levels"])[0] == "hardware"
    # advice names the table's causes and levers for what is off
    advice = {a["key"]: a for a in doc["advice"]}
    assert advice["device_utilization"]["causes"] == ["data pipeline stalls", "uneven task scheduling"]
    assert "NPUUtilizationUnstable" in advice["device_utilization"]["alerts"]
    assert any("double buffering" in lever for lever in advice["memcpy_share"]["levers"])
    assert advice["NPUTrainingStalled"]["runbooks"] == ["docs/runbooks.md#nputrainingstalled"]
    # the stuck job's profile is two days old: the profile alerts ignore it after a day, and so does diagnose
    assert not [s for s, _ in found if s.startswith("profile of job stuck")]
    assert (
        "profile of job stuck rank 0 (node-c:9435) not judged: 2d old at the window's end, older than the 1d "
        "the profile alerts accept (alerting.profile_max_age)"
    ) in doc["notes"]
    # the whole hour holds data: nothing said about less data
    assert not [n for n in doc["notes"] if n.startswith("less data")] and "data for the last" not in doc["window"]


def test_busy_node_is_healthy_and_its_job_has_the_known_split(prometheus: Prometheus) -> None:
    code, doc, found = diagnose_json(prometheus, "--selector", '{instance="node-a:9435"}')
    assert code == 0 and doc["verdict"] == "warning"  # top-3 operators 75%: a warning, not abnormal
    assert {s for s, _ in found if "node-b" in s or "node-c" in s} == set()
    rate = h.job_rate(h.BERT)
    for rank in h.BERT.ranks:
        subject = f"job bert rank {rank} on node-a:9435"
        assert found[(subject, "iteration_time")]["value"] == pytest.approx(rate["iteration_seconds"])
        assert found[(subject, "iteration_rate")]["value"] == pytest.approx(rate["iterations_per_second"])
        assert found[(subject, "throughput")]["value"] == pytest.approx(rate["samples_per_second"])
        assert found[(subject, "idle_gaps")]["value"] == pytest.approx(rate["idle"])
        for phase, share in h.BERT.phases.items():
            assert found[(subject, f"phase.{phase}")]["value"] == pytest.approx(share), phase
        assert found[(subject, "memcpy_share")]["verdict"] == "healthy"
    profile = "profile of job bert rank 0 (node-a:9435)"
    assert found[(profile, "profile.top3_operator_ratio")]["verdict"] == "warning"
    assert found[(profile, "profile.compute_ratio")]["verdict"] == "healthy"
    ops = [f["title"] for f in doc["levels"]["micro"] if f["check"] == "operator" and f["subject"] == profile]
    assert ops == ["operator #1 MatMul", "operator #2 Conv2D", "operator #3 Add", "operator #4 Softmax"]


def test_text_output_shows_the_three_levels_and_what_to_try(prometheus: Prometheus) -> None:
    result = run_diagnose("--prometheus", prometheus.url, "--end", str(prometheus.now), "--selector", '{instance="node-b:9435"}')
    assert result.code == 1 and result.err == ""
    text = result.out
    assert "\x1b[" not in text  # not a terminal: plain
    assert "verdict: ABNORMAL" in text
    for title in ("Macro: is the task stream continuous?", "Meso: where does the step time go?", "Micro: which operators?", "What to try"):
        assert title in text
    assert "likely causes: poor data layout; frequent format conversion (NHWC/NCHW); host round-trips" in text
    assert "runbook docs/runbooks.md#npumemcpyhigh" in text


def test_colour_when_asked(prometheus: Prometheus) -> None:
    result = run_diagnose(
        "--prometheus", prometheus.url, "--end", str(prometheus.now), "--color", "always", "--selector", '{instance="node-b:9435"}'
    )
    assert "\x1b[31;1mabnormal\x1b[0m" in result.out


def test_markdown(prometheus: Prometheus) -> None:
    result = run_diagnose(
        "--prometheus", prometheus.url, "--end", str(prometheus.now), "--format", "markdown", "--selector", '{instance="node-b:9435"}'
    )
    assert result.code == 1
    assert result.out.startswith("# cann-exporter diagnose\n")
    assert (
        "| node-b:9435 NPU 0 chip 0 (device 0) | Device utilization | 40.0% | healthy > 85%, abnormal < 60% | **abnormal** |" in result.out
    )
    assert "## What to try" in result.out


def test_less_data_than_asked_is_said(prometheus: Prometheus) -> None:
    # 40 days asked, 31 held: a verdict on what exists, saying how much that is (to within a sixtieth of the range)
    code, doc, _ = diagnose_json(prometheus, "--range", "40d", "--selector", '{instance="node-a:9435"}')
    assert code == 0
    note = next(n for n in doc["notes"] if n.startswith("less data than asked: --range 40d, but Prometheus holds NPU data"))
    covered = note.split("the last ")[1].split(":")[0]
    assert covered in ("30d8h", "30d16h", "31d", "31d8h", "31d16h"), note
    assert doc["window"].startswith("40d ending ") and doc["window"].endswith(f"(data for the last {covered} only)")
    text = run_diagnose(
        "--prometheus", prometheus.url, "--end", str(prometheus.now), "--range", "40d", "--selector", '{instance="node-a:9435"}'
    ).out
    assert "window: 40d ending " in text and "note: less data than asked" in text


def test_job_filter(prometheus: Prometheus) -> None:
    code, _, found = diagnose_json(prometheus, "--job", "stuck")
    assert code == 1 and {s for s, _ in found} == {"job stuck rank 0 on node-c:9435"}


# --- bad input -------------------------------------------------------------------------------------


def test_unreachable_prometheus_exits_2() -> None:
    result = run_diagnose("--prometheus", f"http://127.0.0.1:{free_port()}", "--timeout", "3s")
    assert (result.code, result.out) == (2, "")
    assert "cannot reach Prometheus at http://127.0.0.1:" in result.err and "Connection refused" in result.err
    assert "Traceback" not in result.err


def test_prometheus_error_is_named(prometheus: Prometheus) -> None:
    result = run_diagnose("--prometheus", prometheus.url, "--selector", '{instance=~"("}')
    assert (result.code, result.out) == (2, "")
    assert "rejected the query (bad_data:" in result.err and "Traceback" not in result.err


def test_not_a_prometheus_exits_2(prometheus: Prometheus) -> None:
    result = run_diagnose("--prometheus", prometheus.url + "/graph")
    assert result.code == 2 and "is this the Prometheus base URL?" in result.err


def test_empty_window_names_what_is_missing(prometheus: Prometheus) -> None:
    long_ago = str(prometheus.now - 90 * 86400)
    result = run_diagnose("--prometheus", prometheus.url, "--end", long_ago)
    assert (result.code, result.out) == (2, "")
    assert "has no NPU data" in result.err
    assert "npu_aicore_utilization_ratio, npu_job_iteration_duration_seconds or npu_profile_*" in result.err


def test_selector_matching_nothing_exits_2(prometheus: Prometheus) -> None:
    result = run_diagnose("--prometheus", prometheus.url, "--end", str(prometheus.now), "--selector", '{instance="nowhere"}')
    assert result.code == 2 and 'matching {instance="nowhere"}' in result.err


def test_missing_series_are_said_but_what_exists_is_diagnosed(prometheus: Prometheus) -> None:
    # Before the jobs started there are only chip series: diagnosed, and meso/micro say what they need.
    result = run_diagnose(
        "--prometheus", prometheus.url, "--end", str(prometheus.now - 10 * 86400), "--selector", '{instance="node-a:9435"}'
    )
    assert result.code == 0
    assert "no data: needs training-job phases (hooks, docs/training-hooks.md) or a profile" in result.out
    assert "no data: needs a profile" in result.out


def test_bad_selector_and_range_are_usage_errors() -> None:
    with pytest.raises(SystemExit) as exc:
        run_diagnose("--prometheus", "http://127.0.0.1:1", "--range", "soon")
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        run_diagnose("--prometheus", "http://127.0.0.1:1", "--selector", "instance")


def test_goodput_and_the_largest_badput_with_its_lever(prometheus: Prometheus) -> None:
    """The history's shares over the last hour: slow's goodput 63% (a warning against the goodput
    row, NPUJobGoodputLow's), its checkpoints 15% of the time (abnormal above 10%, with the lever);
    bert's 90.25% and its largest kind, data_wait at 4.75%, healthy and without a lever."""
    _, _, found = diagnose_json(prometheus)
    slow, bert = "job slow rank 0 on node-b:9435", "job bert rank 0 on node-a:9435"
    good = found[(slow, "goodput")]
    assert good["value"] == pytest.approx(h.SLOW.goodput, abs=0.005)
    assert (good["verdict"], good["alert"], good["bounds"]) == ("warning", "NPUJobGoodputLow", "healthy > 90%, abnormal < 50%")
    bad = found[(slow, "badput")]
    assert bad["title"] == "Largest badput: checkpoint_save" and bad["value"] == pytest.approx(0.15, abs=0.005)
    assert bad["verdict"] == "abnormal" and bad["indicator"] == "badput_share"
    assert bad["detail"] == "saving checkpoints; lever: checkpoint less often, or asynchronously"
    assert found[(bert, "goodput")]["value"] == pytest.approx(h.BERT.goodput, abs=0.005)
    assert found[(bert, "goodput")]["verdict"] == "healthy"
    assert found[(bert, "badput")]["title"] == "Largest badput: data_wait" and found[(bert, "badput")]["verdict"] == "healthy"
    assert "lever" not in found[(bert, "badput")]["detail"]
    text = run_diagnose("--prometheus", prometheus.url, "--end", str(prometheus.now), "--job", "slow").out
    assert "Largest badput: checkpoint_save" in text and "checkpoint less often, or asynchronously" in text
