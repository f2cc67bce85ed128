"""`cann-exporter profile PATH`: run(args) with an argparse namespace, exit codes and output."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from exporter.commands import profile as profile_command
from tests.support.profile_builders import Kernel, Step, torch_profile, write
from tests.support.profile_exports import MSPROF, PT_LEVEL1, build


def invoke(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="cann-exporter profile")
    profile_command.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = profile_command.run(parser.parse_args(list(argv)), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_table_with_verdicts(tmp_path: Path) -> None:
    path = build(tmp_path / "resnet" / "r0_ascend_pt", PT_LEVEL1)
    code, out, err = invoke(str(path))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "== job resnet · rank 0 · torch_npu · Level1 · steps 50 (1)"
    row = {line[:32].strip(): line[32:].split() for line in lines[3:] if line and not line.startswith((" ", "top", "longest"))}
    assert row["compute share"] == ["6.5%", ">", "85%", "<", "60%", "abnormal"]
    assert row["memory copy"] == ["0.6%", "<", "15%", ">", "30%", "healthy"]
    assert row["framework overhead"] == ["11.6%", "<", "10%", "warning"]
    assert row["most expensive operator"] == ["43.2%", "≤", "70%", ">", "70%", "healthy"]
    assert row["step duration"] == ["136.58", "ms"]
    assert "   1  Conv2D" in out and "longest kernel: Conv2D1 (313.9 us)" in out


def test_json_output(tmp_path: Path) -> None:
    torch_profile(
        tmp_path / "job" / "r0_ascend_pt",
        steps=[Step(1, 500.0, 150.0, 350.0)],
        kernels=[Kernel(1, "a", "A", "AI_CORE", 75.0), Kernel(1, "b", "B", "AI_CORE", 25.0)],
    )
    code, out, err = invoke(str(tmp_path), "--json", "--top", "1")
    assert code == 0 and err == ""
    (profile,) = json.loads(out)["profiles"]
    assert profile["compute_ratio"] == 0.5 and profile["max_operator_ratio"] == 0.75
    assert [o["op_type"] for o in profile["top_operators"]] == ["A"]
    assert profile["verdicts"]["max_operator_ratio"] == {
        "indicator": "max_operator_share",
        "verdict": "abnormal",
        "healthy": None,
        "abnormal": 0.7,
        "direction": "lower_is_better",
    }
    assert profile["verdicts"]["compute_ratio"]["verdict"] == "abnormal"
    assert profile["memcpy_ratio"] == 0.0  # the (empty) trace was read: no copies


def test_per_step_and_output_dir_as_path(tmp_path: Path) -> None:
    path = torch_profile(tmp_path / "r0_ascend_pt", steps=[Step(1, 1.0, 0.0, 1.0), Step(2, 3.0, 0.0, 1.0)])
    code, out, _ = invoke(str(path / "ASCEND_PROFILER_OUTPUT"), "--per-step", "--json")
    assert code == 0
    assert [p["steps"] for p in json.loads(out)["profiles"]] == [[1, 2], [1], [2]]


def test_a_file_of_the_export_reports_its_export(tmp_path: Path) -> None:
    path = build(tmp_path / "resnet" / "r0_ascend_pt", PT_LEVEL1)
    code, out, _ = invoke(str(path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"), "--json")
    assert code == 0 and json.loads(out)["profiles"][0]["path"] == str(path)
    code, _, err = invoke(str(tmp_path / "resnet" / "r0_ascend_pt" / "profiler_info_0.json"))
    assert code == 2 and "cannot list" in err


def test_directory_without_profile_exits_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = invoke(str(tmp_path / "empty"))
    assert (code, out) == (2, "")
    assert "no readable profile under" in err and "Traceback" not in err


def test_missing_path_exits_2(tmp_path: Path) -> None:
    code, out, err = invoke(str(tmp_path / "nowhere"))
    assert (code, out) == (2, "")
    assert err == f"cann-exporter profile: {tmp_path / 'nowhere'}: no such file or directory\n"


def test_unreadable_profile_exits_2_with_reason(tmp_path: Path) -> None:
    write(tmp_path / "r0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", "garbage\n")
    code, out, err = invoke(str(tmp_path))
    assert (code, out) == (2, "")
    assert "r0_ascend_pt: skipped (no_data)" in err and "missing_columns" not in err.split("skipped")[0]
    assert "step_trace_time.csv: no column 'Computing'" in err


def test_one_bad_profile_among_good_ones_still_reports(tmp_path: Path) -> None:
    build(tmp_path / "tile" / "PROF_000001_x", MSPROF)
    write(tmp_path / "bad" / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", "")
    code, out, err = invoke(str(tmp_path))
    assert code == 0 and "== job tile · rank 0 · msprof" in out
    assert "bad/r_ascend_pt: skipped" in err


def test_partial_profile_notes_are_shown(tmp_path: Path) -> None:
    path = build(tmp_path / "r0_ascend_pt", PT_LEVEL1)
    write(path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", '[{"ph": "M"}, {')
    code, out, _ = invoke(str(path))
    assert code == 0
    assert "note: trace_view.json: JSON ends inside a value (file cut short?); used the 1 events before it" in out


def test_bad_top_value_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        invoke("x", "--top", "0")
