"""The generated Grafana dashboards: importable structure, the `${datasource}` variable on
every panel and query, fixed unique uids, units, thresholds from the table, and PromQL that
parses and names only metrics the collectors describe (or the recording rules record)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.generate.board import UIDS
from exporter.generate.dashboards import dashboards
from exporter.generate.writer import DASHBOARD_DIR, DATASOURCE_FILE, PROVIDER_FILE
from exporter.thresholds.table import DEFAULT_PATH, load_thresholds, parse_thresholds
from tests.support.paths import ROOT
from tests.support.promql import (
    known_names,
    label_values_query,
    metric_names,
    substitute,
)

FILES = sorted((ROOT / DASHBOARD_DIR).glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def data_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in panels(board) if p["type"] != "row"]


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def test_the_five_dashboards_with_fixed_unique_uids() -> None:
    boards = {p.stem: load(p) for p in FILES}
    assert set(boards) == {"fleet-overview", "node-chip-detail", "training-jobs", "capacity-planning", "exporter-health"}
    uids = [b["uid"] for b in boards.values()]
    assert len(set(uids)) == len(uids) and {boards[k]["uid"] for k in boards} == set(UIDS.values())
    assert all(0 < len(uid) <= 40 for uid in uids), "Grafana uids are at most 40 characters"
    titles = [b["title"] for b in boards.values()]
    assert len(set(titles)) == len(titles)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_importable_structure(path: Path) -> None:
    board = load(path)
    assert board["schemaVersion"] >= 36 and board.get("id") in (None, 0)
    assert board["time"]["from"].startswith("now-") and board["editable"] is True
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    for panel in panels(board):
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, panel["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    # every board picks the scrape job, but capacity planning: the whole cluster (its records sum every job)
    assert ("job" in variables) is (path.stem != "capacity-planning")
    for var in variables.values():
        if var["type"] == "query":
            assert var["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            label_values_query(var["query"]["query"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_panel_has_the_datasource_variable_a_target_and_a_unit(path: Path) -> None:
    board = load(path)
    for panel in data_panels(board):
        title = panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel.get("targets"), f"{title}: no target"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)) and all(ref_ids), title
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
            assert target["expr"].strip(), title
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title}: no unit"
        assert panel.get("options") is not None, f"{title}: no options"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_no_hard_coded_datasource_uid(path: Path) -> None:
    for key, value in walk(load(path)):
        if key == "datasource" and isinstance(value, dict) and value.get("type") != "grafana":
            assert value.get("uid") == "${datasource}", value
        if key == "datasource" and isinstance(value, str):
            pytest.fail(f"datasource given by name: {value!r}")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_query_parses_and_names_known_metrics(path: Path) -> None:
    known = known_names()
    board = load(path)
    for panel in data_panels(board):
        for target in panel["targets"]:
            unknown = metric_names(substitute(target["expr"])) - known
            assert not unknown, f"{panel['title']}: {unknown}"
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            selector, _ = label_values_query(var["query"]["query"])
            assert not metric_names(substitute(selector)) - known, var["name"]


def _panel(board: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in data_panels(board) if p["title"] == title)


def _steps(panel: dict[str, Any]) -> list[tuple[Any, str]]:
    return [(s["value"], s["color"]) for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


def test_threshold_lines_and_units_come_from_the_table() -> None:
    boards = dashboards(load_thresholds())
    util = _panel(boards["node-chip-detail"], "AI Core utilization")
    assert util["fieldConfig"]["defaults"]["unit"] == "percentunit"
    assert _steps(util) == [(None, "red"), (0.6, "orange"), (0.85, "green")]
    assert util["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "dashed"
    memcpy = _panel(boards["training-jobs"], "Memory-copy share (H2D + D2H)")
    assert _steps(memcpy) == [(None, "green"), (0.15, "orange"), (0.3, "red")]
    temp = _panel(boards["node-chip-detail"], "Temperature")
    assert temp["fieldConfig"]["defaults"]["unit"] == "celsius" and _steps(temp) == [(None, "green"), (85, "red")]
    assert _panel(boards["node-chip-detail"], "HBM used")["fieldConfig"]["defaults"]["unit"] == "bytes"

    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["indicators"][0]["abnormal"], data["indicators"][0]["healthy"] = 0.5, 0.8
    data["indicators"][3]["healthy"] = 0.1
    next(a for a in data["alerts"] if a["alert"] == "NPUTemperatureHigh")["threshold"] = 90
    other = dashboards(parse_thresholds(data))
    assert _steps(_panel(other["node-chip-detail"], "AI Core utilization")) == [(None, "red"), (0.5, "orange"), (0.8, "green")]
    assert _steps(_panel(other["training-jobs"], "Memory-copy share (H2D + D2H)")) == [(None, "green"), (0.1, "orange"), (0.3, "red")]
    assert _steps(_panel(other["node-chip-detail"], "Temperature"))[-1] == (90, "red")
    fleet = {p["title"] for p in data_panels(other["fleet-overview"])}
    assert "In use below 50%" in fleet and "Chips in use below 50%" in fleet


def _row(board: dict[str, Any], title: str) -> list[dict[str, Any]]:
    """The panels under the row ``title`` (rows are expanded: panels follow their row)."""
    out, inside = [], False
    for panel in board["panels"]:
        if panel["type"] == "row":
            inside = panel["title"] == title
        elif inside:
            out.append(panel)
    return out


def test_the_network_row_of_the_node_dashboard() -> None:
    board = load(ROOT / DASHBOARD_DIR / "node-chip-detail.json")
    panels = {p["title"]: p for p in _row(board, "Network")}
    assert {
        "Links up",
        "Net health state",
        "Link flaps (15m)",
        "Throughput",
        "PFC frames/s",
        "Errors/s by kind",
        "Optical receive power",
        "Optical transmit power",
        "Optical module temperature",
    } <= set(panels)
    exprs = {title: " ".join(t["expr"] for t in panel["targets"]) for title, panel in panels.items()}
    assert "rate(npu_network_bytes_total{" in exprs["Throughput"] and panels["Throughput"]["fieldConfig"]["defaults"]["unit"] == "Bps"
    assert 'kind="pfc"' in exprs["PFC frames/s"] and "by (instance, device, port, kind)" in exprs["Errors/s by kind"]
    assert "npu_network_link_down_transitions_total" in exprs["Link flaps (15m)"]
    for title, metric in (
        ("Optical receive power", "npu_optical_rx_power_watts"),
        ("Optical transmit power", "npu_optical_tx_power_watts"),
    ):
        assert f"10 * log10(clamp_min({metric}{{" in exprs[title] and "* 1000, " in exprs[title]
        assert panels[title]["fieldConfig"]["defaults"]["unit"] == "dBm"
    # threshold lines: the alerts' bounds, optical power converted to dBm
    assert _steps(panels["Optical receive power"]) == [(None, "red"), (-8.4, "green"), (5.5, "red")]
    assert _steps(panels["Optical transmit power"]) == [(None, "red"), (-5.5, "green"), (5.5, "red")]
    assert _steps(panels["Optical module temperature"]) == [(None, "green"), (70, "red")]
    assert _steps(panels["PFC frames/s"])[-1][0] == 5000 and _steps(panels["Errors/s by kind"])[-1][0] == 0.1
    assert _steps(panels["Link flaps (15m)"])[-1][0] == 3
    mapping = panels["Net health state"]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {m["text"]: m["color"] for m in mapping.values()}["Init"] == "green"
    assert {m["text"]: m["color"] for m in mapping.values()}["Fault"] == "red"
    assert all(p["fieldConfig"]["defaults"].get("thresholds") for p in panels.values())


def test_network_threshold_lines_come_from_the_table() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    entry = {a["alert"]: a for a in data["alerts"]}
    entry["NPUOpticalPowerOutOfRange"]["params"].update(rx_power_low=0.0001, rx_power_high=0.002, tx_power_low=0.0005)
    entry["NPUOpticalTemperatureHigh"]["threshold"] = 75
    entry["NPUNetworkPFCStorm"]["threshold"] = 20000
    entry["NPUNetworkLinkFlapping"].update(threshold=5, range="1h")
    entry["NPUNetworkUnhealthy"]["params"]["ok_states"] = ["Success"]
    board = dashboards(parse_thresholds(data))["node-chip-detail"]
    assert _steps(_panel(board, "Optical receive power")) == [(None, "red"), (-10.0, "green"), (3.01, "red")]
    assert _steps(_panel(board, "Optical transmit power")) == [(None, "red"), (-3.01, "green"), (5.5, "red")]
    assert _steps(_panel(board, "Optical module temperature"))[-1] == (75, "red")
    assert _steps(_panel(board, "PFC frames/s"))[-1][0] == 20000
    flaps = _panel(board, "Link flaps (1h)")
    assert _steps(flaps)[-1][0] == 5 and "[1h]" in flaps["targets"][0]["expr"]
    mapping = _panel(board, "Net health state")["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {m["text"]: m["color"] for m in mapping.values()}["Init"] == "red"


def test_the_fleet_overview_has_what_the_issue_asks_for() -> None:
    board = load(ROOT / DASHBOARD_DIR / "fleet-overview.json")
    types = {p["title"]: p["type"] for p in data_panels(board)}
    assert any(t == "heatmap" for t in types.values())
    assert types["Health matrix"] == "status-history" and types["Missing chips"] == "stat"
    assert types["Chips in use below 60%"] == "table" and types["Top offenders (lowest 1h utilization, chips in use)"] == "table"
    capacity = load(ROOT / DASHBOARD_DIR / "capacity-planning.json")
    assert capacity["time"]["from"] == "now-30d"
    assert any("predict_linear" in t["expr"] for p in data_panels(capacity) for t in p["targets"])


def test_capacity_graphs_over_time_read_no_per_chip_series() -> None:
    """A graph over 30 days reads every sample of its series: per-chip recorded series
    (8 per node) only in instant queries, which read the latest once."""
    capacity = load(ROOT / DASHBOARD_DIR / "capacity-planning.json")
    targets = [(p["title"], t) for p in data_panels(capacity) for t in p["targets"]]
    assert any(t["instant"] and "chip:" in t["expr"] for _, t in targets)
    over_time = [(title, t["expr"]) for title, t in targets if not t["instant"]]
    assert over_time and not [(title, expr) for title, expr in over_time if "chip:" in expr]
    assert ("Peak HBM use (daily)", "instance:npu_hbm_usage:max1d") in over_time


def test_provisioning_files() -> None:
    datasource = yaml.safe_load((ROOT / DATASOURCE_FILE).read_text())
    assert datasource["apiVersion"] == 1 and datasource["datasources"][0]["type"] == "prometheus"
    provider = yaml.safe_load((ROOT / PROVIDER_FILE).read_text())
    assert provider["providers"][0]["type"] == "file" and provider["providers"][0]["options"]["path"]


# --- pickers ------------------------------------------------------------------------------------
def narrowing_pickers(board: dict[str, Any], expr: str) -> set[str]:
    """The pickers an expression narrows by: those it names, and those whose choice fills the list
    of a picker it names that has no custom "All" (its All is then the filtered list)."""
    variables = {v["name"]: v for v in board["templating"]["list"] if v["type"] == "query"}
    used = {name for name in variables if f"${name}" in expr or f"${{{name}}}" in expr}
    while True:
        more = {
            dep
            for name in used
            if not variables[name].get("allValue")
            for dep in variables
            if f"${dep}" in variables[name]["query"]["query"]
        } - used
        if not more:
            return used
        used |= more


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_query_narrows_by_every_picker_of_its_dashboard(path: Path) -> None:
    board = load(path)
    pickers = {v["name"] for v in board["templating"]["list"] if v["type"] == "query"}
    ignoring = [
        f"{panel['title']} [{target['refId']}] ignores {sorted(pickers - narrowing_pickers(board, target['expr']))}"
        for panel in data_panels(board)
        for target in panel["targets"]
        if pickers - narrowing_pickers(board, target["expr"])
    ]
    assert not ignoring, "\n".join(ignoring)


def test_choosing_a_node_narrows_the_instances() -> None:
    """Instance's "All" is the list of the chosen nodes' targets, never `.*` (which would show
    every node whatever Node says); Node keeps `.*` so targets without a node label stay in."""
    for path in FILES:
        variables = {v["name"]: v for v in load(path)["templating"]["list"]}
        if "node" in variables:
            assert "$node" in variables["instance"]["query"]["query"] and not variables["instance"].get("allValue"), path.stem
            assert variables["node"]["allValue"] == ".*", path.stem


def test_training_panels_say_why_they_may_be_empty_and_draw_shares_within_0_and_100_percent() -> None:
    """Every panel of the training dashboard either has data for a CPU job or says in its
    description when it stays empty; every share axis is 0..100% and every hooks share is
    clamped and drawn for running ranks only (a finished job shows in Job state, not as a
    climbing idle share)."""
    board = load(ROOT / DASHBOARD_DIR / "training-jobs.json")
    undescribed = [p["title"] for p in data_panels(board) if not p.get("description")]
    assert not undescribed, undescribed
    for panel in data_panels(board):
        defaults = panel.get("fieldConfig", {}).get("defaults", {})
        if panel["type"] == "table" or defaults.get("unit") != "percentunit" or any("offset" in t["expr"] for t in panel["targets"]):
            continue  # a change against a baseline may be negative: not a share
        assert (defaults.get("min"), defaults.get("max")) == (0, 1), panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            if "rate(" in expr and "npu_aicore" not in expr and "offset" not in expr:
                # goodput shares keep a stalled rank: its downtime, between a crash and the restart, is theirs
                running = 'state="running"' in expr or "npu_job_goodput_seconds_total" in expr
                assert expr.lstrip().startswith("clamp(") and running, (panel["title"], expr)
    assert any("npu_job_state{" in t["expr"] for p in data_panels(board) for t in p["targets"] if p["title"] == "Job state")
