"""The capacity dashboard's 30-day projections, evaluated by promtool on 2 hours, 3 days and 10
days of the records they project: nothing before MIN_FORECAST_DAYS (the same minimum as
`report`), and never fewer than 0 or more chips than there are, nor a share outside 0-100%."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from exporter.generate.writer import DASHBOARD_DIR
from exporter.thresholds.records import MIN_FORECAST_DAYS
from tests.support.paths import ROOT
from tests.support.tools import tool

CHIPS_IN_USE, UTILIZATION = "cluster:npu_chips_in_use:sum", "cluster:npu_aicore_utilization_ratio:avg1h"


def projections() -> dict[str, str]:
    """{projected record: the panel's query}, from the committed dashboard."""
    board = json.loads((ROOT / DASHBOARD_DIR / "capacity-planning.json").read_text())
    out = {}
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            if target.get("legendFormat") == "in 30 days":
                out[next(r for r in (CHIPS_IN_USE, UTILIZATION) if r in target["expr"])] = target["expr"]
    return out


def case(name: str, hours: int, chips: str, util: str, expect: dict[str, float | None]) -> dict[str, Any]:
    """``hours`` of hourly samples of both records (promtool series notation), 47 chips; the
    projection of each at the last sample: a value, or None for no result."""
    exprs = projections()
    return {
        "name": name,
        "interval": "1h",
        "input_series": [
            {"series": CHIPS_IN_USE, "values": chips},
            {"series": UTILIZATION, "values": util},
            {"series": "cluster:npu_chips:count", "values": f"47x{hours}"},
        ],
        "promql_expr_test": [
            {"expr": exprs[record], "eval_time": f"{hours}h", "exp_samples": [] if value is None else [{"labels": "{}", "value": value}]}
            for record, value in expect.items()
        ],
    }


def test_projections_need_history_and_stay_within_physical_bounds(tmp_path: Path) -> None:
    assert set(projections()) == {CHIPS_IN_USE, UTILIZATION}
    days = MIN_FORECAST_DAYS * 24
    tests = [
        # 2 hours of a steep climb: a line through it would project thousands of chips; nothing shown
        case("2 hours", 2, "0+20x2", "0+0.3x2", {CHIPS_IN_USE: None, UTILIZATION: None}),
        # one hour short of the minimum: still nothing
        case("minimum minus an hour", days - 1, f"10x{days - 1}", f"0.5x{days - 1}", {CHIPS_IN_USE: None, UTILIZATION: None}),
        # exactly the minimum, flat: the projection is the level itself
        case("minimum", days, f"10x{days}", f"0.5x{days}", {CHIPS_IN_USE: 10, UTILIZATION: 0.5}),
        # 10 days climbing: capped at the 47 chips and 100%
        case("10 days climbing", 240, "0+1x240", "0+0.01x240", {CHIPS_IN_USE: 47, UTILIZATION: 1}),
        # 10 days falling: never below 0
        case("10 days falling", 240, "47-0.2x240", "1-0.004x240", {CHIPS_IN_USE: 0, UTILIZATION: 0}),
    ]
    path = tmp_path / "forecast.test.yml"
    path.write_text(yaml.safe_dump({"evaluation_interval": "1h", "tests": tests}, sort_keys=False))
    result = subprocess.run([tool("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
