"""The threshold table: its numbers, verdict boundaries, validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from exporter.app.catalogue import ALL_METRICS
from exporter.thresholds.table import (
    DEFAULT_PATH,
    GenerateError,
    ThresholdError,
    load_thresholds,
    parse_thresholds,
    verdict,
)


def test_the_guides_numbers() -> None:
    table = load_thresholds()
    bounds = {i.id: (i.direction, i.healthy, i.abnormal) for i in table.indicators}
    assert bounds == {
        "device_utilization": ("higher_is_better", 0.85, 0.60),
        "top3_operator_share": ("lower_is_better", 0.50, None),
        "max_operator_share": ("lower_is_better", None, 0.70),
        "memcpy_share": ("lower_is_better", 0.15, 0.30),
        "framework_overhead_share": ("lower_is_better", 0.10, None),
        "idle_share": ("lower_is_better", 0.10, None),
        "model_flops_utilization": ("higher_is_better", 0.35, None),
        "goodput": ("higher_is_better", 0.90, 0.50),
        "badput_share": ("lower_is_better", 0.05, 0.10),
    }
    assert table["goodput"].alert == "NPUJobGoodputLow" and "2407.21783" in table["goodput"].source
    assert table["model_flops_utilization"].ceiling == 0.60 and "2204.02311" in table["model_flops_utilization"].source
    assert table["memcpy_share"].alert == "NPUMemcpyHigh"
    assert table["device_utilization"].causes == ("data pipeline stalls", "uneven task scheduling")
    assert all(i.levers and i.causes and i.window for i in table.indicators)


@pytest.mark.parametrize(
    "indicator,value,expected",
    [
        ("memcpy_share", 0.14, "healthy"),
        ("memcpy_share", 0.15, "warning"),
        ("memcpy_share", 0.30, "warning"),
        ("memcpy_share", 0.35, "abnormal"),
        ("device_utilization", 0.86, "healthy"),
        ("device_utilization", 0.85, "warning"),
        ("device_utilization", 0.60, "warning"),
        ("device_utilization", 0.59, "abnormal"),
        ("top3_operator_share", 0.49, "healthy"),
        ("top3_operator_share", 0.99, "warning"),
        ("max_operator_share", 0.70, "healthy"),
        ("max_operator_share", 0.75, "abnormal"),
        ("framework_overhead_share", 0.05, "healthy"),
        ("framework_overhead_share", 0.5, "warning"),
        ("model_flops_utilization", 0.36, "healthy"),
        ("model_flops_utilization", 0.35, "warning"),
        ("model_flops_utilization", 0.01, "warning"),
    ],
)
def test_verdict_boundaries_are_strict(indicator: str, value: float, expected: str) -> None:
    assert verdict(indicator, value) == expected


def test_every_metric_named_in_the_table_exists() -> None:
    known = {spec.name for spec in ALL_METRICS}
    named = {metric for i in load_thresholds().indicators for metric in i.metrics}
    assert named <= known
    assert [i.id for i in load_thresholds().for_metric("npu_profile_compute_ratio")] == ["device_utilization"]


def test_validation_lists_every_problem(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["indicators"][0]["direction"] = "up"
    data["indicators"][1]["window"] = "soon"
    data["indicators"][2]["abnormal"] = "high"
    data["indicators"][3]["healthy"] = 0.5  # above its abnormal 0.30 for lower_is_better
    data["indicators"].append(dict(data["indicators"][4]))
    with pytest.raises(ThresholdError) as err:
        parse_thresholds(data, "t.yaml")
    text = "\n".join(err.value.problems)
    assert "indicators[0] (device_utilization): direction" in text
    assert "indicators[1] (top3_operator_share): window" in text
    assert "indicators[2] (max_operator_share): abnormal: expected a finite number or null" in text
    assert "indicators[3] (memcpy_share): healthy 0.5 and abnormal 0.3 are in the wrong order" in text
    assert "duplicate indicator id 'framework_overhead_share'" in text


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ThresholdError, match="missing.yaml: not found"):
        load_thresholds(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("indicators: [")
    with pytest.raises(ThresholdError, match="not valid YAML"):
        load_thresholds(tmp_path / "bad.yaml")
    with pytest.raises(ThresholdError, match="expected a mapping"):
        parse_thresholds([1, 2])


def test_an_alert_found_by_name_and_what_its_expression_needs() -> None:
    table = load_thresholds()
    assert table.find("NPUTemperatureHigh") == table.alert("NPUTemperatureHigh")
    assert table.find("NoSuchAlert") is None
    with pytest.raises(KeyError):
        table.alert("NoSuchAlert")
    spec = table.alert("NPUECCDoubleBitErrors")
    assert (spec.bound, spec.span) == (spec.threshold, spec.range)
    bare = dataclasses.replace(spec, threshold=None, range=None)
    with pytest.raises(GenerateError, match="NPUECCDoubleBitErrors: needs a threshold"):
        _ = bare.bound
    with pytest.raises(GenerateError, match="NPUECCDoubleBitErrors: needs a range"):
        _ = bare.span
