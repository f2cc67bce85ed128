"""Baselines (docs/tuning.md, 'Baselines'): --save-baseline from a window two days ago, --baseline
now. bert got 20% faster (healthy), slow got 20% slower (a regression: abnormal); a run less
than 10% faster is flagged (warning). Bad baseline files exit 2 naming the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.diagnostics.baseline import (
    JobPerf,
    compare,
    job_performance,
    speedup_verdict,
)
from exporter.diagnostics.model import CannotDiagnose, JobStats
from exporter.thresholds.table import load_thresholds
from tests.support import history as h
from tests.support.cli import run_diagnose
from tests.support.prometheus import Prometheus

pytestmark = pytest.mark.timeout(120)


def baseline_rows(out: str) -> dict[tuple[str, str], dict]:
    return {(f["subject"], f["check"]): f for f in json.loads(out)["levels"]["baseline"]}


@pytest.fixture(scope="module")
def saved(prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("baseline") / "baseline.json"
    two_days_ago = str(prometheus.now - 2 * 86400)
    result = run_diagnose("--prometheus", prometheus.url, "--end", two_days_ago, "--save-baseline", str(path))
    assert result.code == 1 and result.err == ""  # the cluster was abnormal then too; the file is written anyway
    assert f"baseline saved: {path} (jobs: bert, slow, stuck)" in result.out
    return path


def test_saved_baseline_holds_the_known_numbers(saved: Path) -> None:
    doc = json.loads(saved.read_text())
    assert doc["kind"] == "cann-exporter-baseline" and doc["version"] == 1
    bert = doc["jobs"]["bert"]
    assert bert["iteration_seconds"] == pytest.approx(h.BERT.before)
    assert bert["samples_per_second"] == pytest.approx(len(h.BERT.ranks) * 32 * h.BERT.busy / h.BERT.before)
    assert bert["ranks"] == 2
    assert doc["jobs"]["slow"]["iteration_seconds"] == pytest.approx(h.SLOW.before)


def test_faster_job_is_healthy_and_the_regression_abnormal(prometheus: Prometheus, saved: Path) -> None:
    result = run_diagnose(
        "--prometheus",
        prometheus.url,
        "--end",
        str(prometheus.now),
        "--baseline",
        str(saved),
        "--job",
        "bert",
        "--job",
        "slow",
        "--format",
        "json",
    )
    assert result.code == 1, result.err
    found = baseline_rows(result.out)
    bert = found[("job bert", "speedup.iteration_time")]
    assert bert["value"] == pytest.approx(h.BERT.before / h.BERT.after - 1)  # +20%
    assert bert["verdict"] == "healthy"
    assert found[("job bert", "speedup.throughput")]["value"] == pytest.approx(0.20)
    slow = found[("job slow", "speedup.iteration_time")]
    assert slow["value"] == pytest.approx(h.SLOW.before / h.SLOW.after - 1)  # -16.7%: 20% slower
    assert (slow["verdict"], slow["alert"]) == ("abnormal", "NPUIterationTimeRegression")


def test_only_the_faster_job_gates_green(prometheus: Prometheus, saved: Path) -> None:
    result = run_diagnose(
        "--prometheus",
        prometheus.url,
        "--end",
        str(prometheus.now),
        "--baseline",
        str(saved),
        "--job",
        "bert",
        "--selector",
        '{instance="node-a:9435"}',
    )
    assert result.code == 0, result.err
    assert "Baseline: faster or slower than before?" in result.out


def test_small_speedup_is_flagged(prometheus: Prometheus, tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"kind": "cann-exporter-baseline", "version": 1, "jobs": {"bert": {"iteration_seconds": 0.26}}}))
    result = run_diagnose(
        "--prometheus", prometheus.url, "--end", str(prometheus.now), "--baseline", str(path), "--job", "bert", "--format", "json"
    )
    row = baseline_rows(result.out)[("job bert", "speedup.iteration_time")]
    assert row["value"] == pytest.approx(0.26 / 0.25 - 1) and row["verdict"] == "warning"
    assert result.code == 0


def test_baseline_from_a_profile(tmp_path: Path) -> None:
    from tests.support.profile_builders import Step, torch_profile

    torch_profile(tmp_path / "p" / "job" / "r0_ascend_pt", steps=[Step(1, 800.0, 0.0, 200.0)])
    base = tmp_path / "base.json"
    saved = run_diagnose("--profile-dir", str(tmp_path / "p"), "--save-baseline", str(base))
    assert saved.code == 0 and json.loads(base.read_text())["jobs"]["job"]["iteration_seconds"] == pytest.approx(0.001)
    again = run_diagnose("--profile-dir", str(tmp_path / "p"), "--baseline", str(base), "--format", "json")
    assert baseline_rows(again.out)[("job job", "speedup.iteration_time")]["verdict"] == "warning"  # 0%: below 10%


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "not valid JSON (line 1 column 2"),
        ("[]", "expected a JSON object written by --save-baseline"),
        ('{"kind": "cann-exporter-baseline", "version": 1, "jobs": {}}', "jobs: missing or empty"),
        (
            '{"kind": "cann-exporter-baseline", "version": 1, "jobs": {"bert": {"iteration_seconds": "fast"}}}',
            "jobs.bert.iteration_seconds: expected a positive number, got 'fast'",
        ),
        ('{"kind": "other", "version": 1, "jobs": {"bert": {"iteration_seconds": 1}}}', "kind/version: expected"),
        ('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested more than 64 levels deep"),
        ('{"jobs": {"bert": {"iteration_seconds": ' + "9" * 5000 + "}}}", "a 5000-digit integer"),
        ('{"kind": "cann-exporter-baseline"}'.encode("utf-16"), "UTF-16 text (byte-order mark)"),
    ],
)
def test_corrupt_baseline_exits_2(prometheus: Prometheus, tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run_diagnose("--prometheus", prometheus.url, "--end", str(prometheus.now), "--baseline", str(path))
    assert (result.code, result.out) == (2, "")
    assert f"baseline {path}: " in result.err and message in result.err and "Traceback" not in result.err


def test_missing_baseline_file_exits_2(tmp_path: Path) -> None:
    result = run_diagnose("--simulate", "healthy", "--baseline", str(tmp_path / "none.json"))
    assert result.code == 2 and "not found (No such file or directory)" in result.err


def test_baseline_without_matching_jobs_exits_2(prometheus: Prometheus, tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"kind": "cann-exporter-baseline", "version": 1, "jobs": {"gpt": {"iteration_seconds": 1}}}))
    result = run_diagnose("--prometheus", prometheus.url, "--end", str(prometheus.now), "--baseline", str(path))
    assert result.code == 2
    assert "none of its jobs (gpt) has iteration time or throughput in this data (jobs found: bert, slow)" in result.err


def test_nothing_to_save_exits_2(tmp_path: Path) -> None:
    # A node without jobs: its per-card details and network (simulated calls) add nothing to save.
    (tmp_path / "c.yaml").write_text('npu_smi: {details: ""}\nhccn: {enabled: false}\n')
    result = run_diagnose("--simulate", "healthy", "--config", str(tmp_path / "c.yaml"), "--save-baseline", str(tmp_path / "b.json"))
    assert result.code == 2 and "nothing to save as a baseline" in result.err
    assert not (tmp_path / "b.json").exists()


# --- the pure parts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "speedup,expected",
    [
        (0.20, "healthy"),
        (0.10, "healthy"),
        (0.09, "warning"),
        (0.0, "warning"),
        (-0.05, "warning"),
        (1 / 1.1 - 1 + 1e-9, "warning"),
        (1 / 1.1 - 1 - 1e-3, "abnormal"),
        (-0.5, "abnormal"),
    ],
)
def test_speedup_verdict(speedup: float, expected: str) -> None:
    assert speedup_verdict(speedup, regression=0.10, target=0.10) == expected


def test_bounds_come_from_the_table() -> None:
    spec = load_thresholds().alert("NPUIterationTimeRegression")
    assert spec.threshold == 0.10 and spec.param("speedup") == 0.10


def test_job_performance_weights_ranks_by_iterations() -> None:
    jobs = [JobStats("", "j", "0", 1.0, 1.0, 10.0), JobStats("", "j", "1", 2.0, 3.0, 20.0)]
    perf = job_performance(jobs)["j"]
    assert perf.iteration_seconds == pytest.approx((1.0 * 1 + 2.0 * 3) / 4) and perf.samples_per_second == 30.0


def test_compare_with_no_overlap_raises() -> None:
    with pytest.raises(CannotDiagnose):
        compare({"a": JobPerf("a", 1.0)}, {"b": JobPerf("b", 1.0)}, load_thresholds())
