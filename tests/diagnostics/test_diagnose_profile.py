"""`diagnose --profile-dir`: the fixture profiles (tests/fixtures/profiling through the
tests/profiles builders) give the same numbers and verdicts as `cann-exporter profile`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_diagnose
from tests.support.profile_builders import Kernel, Step, torch_profile
from tests.support.profile_exports import MSPROF, PT_LEVEL1, build


def findings(out: str) -> dict[str, dict]:
    doc = json.loads(out)
    return {f["check"]: f for level in doc["levels"].values() for f in level if f["check"] != "operator"}


def test_level1_profile(tmp_path: Path) -> None:
    build(tmp_path / "resnet" / "r0_ascend_pt", PT_LEVEL1)
    result = run_diagnose("--profile-dir", str(tmp_path), "--format", "json")
    assert result.code == 1, result.err
    found = findings(result.out)
    # The numbers `cann-exporter profile` shows for this sample (tests/profiles/test_profile_command.py).
    assert (found["profile.compute_ratio"]["value"], found["profile.compute_ratio"]["verdict"]) == (
        pytest.approx(0.065, abs=5e-4),
        "abnormal",
    )
    assert found["profile.compute_ratio"]["level"] == "meso"
    assert found["profile.memcpy_ratio"]["verdict"] == "healthy"
    assert found["profile.framework_overhead_ratio"]["verdict"] == "warning"
    assert found["profile.idle_ratio"]["level"] == "macro"
    assert (found["profile.max_operator_ratio"]["value"], found["profile.max_operator_ratio"]["verdict"]) == (
        pytest.approx(0.432, abs=5e-4),
        "healthy",
    )
    assert found["profile.step_duration_seconds"]["value"] == pytest.approx(0.13658, abs=1e-5)
    ops = [f["title"] for f in json.loads(result.out)["levels"]["micro"] if f["check"] == "operator"]
    assert ops[0] == "operator #1 Conv2D" and len(ops) == 5
    assert json.loads(result.out)["levels"]["micro"][0]["subject"] == "profile of job resnet rank 0 (r0_ascend_pt)"


def test_msprof_profile_text(tmp_path: Path) -> None:
    build(tmp_path / "tile" / "PROF_000001_x", MSPROF)
    result = run_diagnose("--profile-dir", str(tmp_path))
    assert result.code in (0, 1) and result.err == ""
    assert "profile of job tile rank 0 (PROF_000001_x)" in result.out
    assert "Micro: which operators?" in result.out


def test_healthy_synthetic_profile_exits_0(tmp_path: Path) -> None:
    kernels = [Kernel(1, f"k{i}", f"Op{i}", "AI_CORE", 10.0) for i in range(10)]  # 10% each: top-3 30%
    torch_profile(tmp_path / "job" / "r0_ascend_pt", steps=[Step(1, 950.0, 0.0, 50.0)], kernels=kernels)
    result = run_diagnose("--profile-dir", str(tmp_path), "--format", "json")
    assert result.code == 0, result.out
    found = findings(result.out)
    assert found["profile.compute_ratio"]["value"] == pytest.approx(0.95)
    assert found["profile.top3_operator_ratio"]["verdict"] == "healthy"
    assert json.loads(result.out)["verdict"] == "healthy"


def test_hot_operator_is_abnormal(tmp_path: Path) -> None:
    kernels = [Kernel(1, "a", "MatMul", "AI_CORE", 80.0), Kernel(1, "b", "Add", "AI_CORE", 20.0)]
    torch_profile(tmp_path / "job" / "r0_ascend_pt", steps=[Step(1, 950.0, 0.0, 50.0)], kernels=kernels)
    result = run_diagnose("--profile-dir", str(tmp_path), "--format", "markdown")
    assert result.code == 1
    assert "| profile: most expensive operator | 80.0% | healthy ≤ 70%, abnormal > 70% | **abnormal** |" in result.out
    assert "custom operators (TBE / Ascend C)" in result.out


def test_empty_and_missing_profile_dirs_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_diagnose("--profile-dir", str(tmp_path / "empty"))
    assert (result.code, result.out) == (2, "") and "no readable profile under" in result.err
    result = run_diagnose("--profile-dir", str(tmp_path / "nowhere"))
    assert result.code == 2 and "no such file or directory" in result.err and "Traceback" not in result.err
