"""The generated rule files: committed copies current, valid for promtool, unit-tested by
promtool, every contract alert present and documented, every metric name real."""

from __future__ import annotations

import argparse
import io
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from exporter.commands.generate import add_arguments, run
from exporter.generate.recording import recording_rules
from exporter.generate.rules import CONTRACT_ALERTS, alerts
from exporter.generate.writer import (
    ALERTS_FILE,
    MARKER,
    RECORDING_FILE,
    render,
    stale_files,
    write,
)
from exporter.thresholds.table import (
    DEFAULT_PATH,
    GenerateError,
    ThresholdError,
    duration_seconds,
    load_thresholds,
    parse_thresholds,
)
from tests.support.paths import ROOT
from tests.support.promql import known_names, metric_names
from tests.support.tools import tool

# The contract alert names (users' routing and silences depend on them).
CONTRACT_ALERT_NAMES = {
    "NPULowUtilization",
    "NPUUtilizationUnstable",
    "NPUHotOperator",
    "NPUTopOperatorsDominant",
    "NPUMemcpyHigh",
    "NPUFrameworkOverheadHigh",
    "NPUIdleGapsHigh",
    "NPUTrainingStalled",
    "NPUIterationTimeRegression",
    "NPUJobStragglerRank",
    "NPUJobGoodputLow",
    "NPUUnhealthy",
    "NPUNeedsIsolation",
    "NPUMissing",
    "NPUTemperatureHigh",
    "NPUHBMAlmostFull",
    "NPUECCDoubleBitErrors",
    "NPUMemoryPagesIsolated",
    "CANNExporterSourceFailing",
    "CANNExporterDown",
    "CANNExporterMemoryHigh",
    "CANNExporterFileDescriptorsHigh",
    "CANNExporterSimulated",
}
# Alerts that page at two severities under one name (one rule each, excluding each other).
TIERED_ALERTS = {"NPUMemoryPagesIsolated": ["warning", "critical"]}
# The network/interconnect alerts (hccn_tool ports and optics).
NETWORK_ALERTS = {
    "NPUNetworkLinkDown",
    "NPUNetworkLinkFlapping",
    "NPUNetworkErrors",
    "NPUNetworkPFCStorm",
    "NPUOpticalPowerOutOfRange",
    "NPUOpticalTemperatureHigh",
    "NPUNetworkUnhealthy",
}
# The chip's own links and sensors (npu-smi -t pcie-err, hccs, sio-info, sensors).
INTERCONNECT_ALERTS = {"NPUPCIeErrors", "NPUHCCSLinkDown", "NPUHCCSErrors", "NPUSIOErrors", "NPUSensorTemperatureHigh"}
ALL_ALERTS = CONTRACT_ALERT_NAMES | NETWORK_ALERTS | INTERCONNECT_ALERTS

JOB_ALERTS = {
    "NPUHotOperator",
    "NPUTopOperatorsDominant",
    "NPUMemcpyHigh",
    "NPUFrameworkOverheadHigh",
    "NPUIdleGapsHigh",
    "NPUTrainingStalled",
    "NPUIterationTimeRegression",
    "NPUJobStragglerRank",
    "NPUJobGoodputLow",
}


def rule_files() -> list[Path]:
    return sorted([*(ROOT / "alerts").glob("*.yml"), *(ROOT / "alerts").glob("*.yaml")])


def all_alert_rules(doc: dict) -> list[dict]:
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def unheld(rule: dict) -> str:
    """The alert's own expression, without the branch that holds it across an outage."""
    return str(rule["expr"]).split("\nor\n(\n  max without (alertname, alertstate, severity) (ALERTS{")[0].rstrip("\n")


# --- drift ------------------------------------------------------------------------------------
def test_committed_files_match_the_generator() -> None:
    """`cann-exporter generate` run on the packaged table writes exactly the committed files."""
    files = render(load_thresholds())
    stale = [rel for rel, text in files.items() if not (ROOT / rel).exists() or (ROOT / rel).read_text() != text]
    leftovers = [str(p.relative_to(ROOT)) for p in stale_files(ROOT, files)]
    assert not stale and not leftovers, (
        f"out of date: {stale}, no longer generated: {leftovers}; run `cann-exporter generate` "
        "(or `python -m exporter.generate`) at the repository root and commit the result"
    )


def test_every_generated_file_carries_the_header() -> None:
    for rel, text in render(load_thresholds()).items():
        assert MARKER in text, rel


def test_run_writes_and_prunes(tmp_path: Path) -> None:
    (tmp_path / "grafana" / "dashboards").mkdir(parents=True)
    old = tmp_path / "grafana" / "dashboards" / "renamed.json"
    old.write_text(f'{{"description": "{MARKER}"}}')
    mine = tmp_path / "alerts" / "mine.yml"
    mine.parent.mkdir()
    mine.write_text("groups: []\n")
    out, err = io.StringIO(), io.StringIO()
    assert run(argparse.Namespace(thresholds=None, out=str(tmp_path)), out, err) == 0, err.getvalue()
    assert (tmp_path / ALERTS_FILE).exists() and (tmp_path / RECORDING_FILE).exists()
    assert len(list((tmp_path / "grafana" / "dashboards").glob("*.json"))) == 5
    assert not old.exists(), "a generated file no longer produced is removed"
    assert mine.exists(), "files without the marker are left alone"


def test_run_reports_a_bad_table(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["alerts"][0]["window"] = "soon"
    data["alerts"].append({"alert": "NPUSomethingNew", "threshold": 1, "window": "1m", "severity": "info"})
    bad.write_text(yaml.safe_dump(data))
    err = io.StringIO()
    assert run(argparse.Namespace(thresholds=str(bad), out=str(tmp_path)), io.StringIO(), err) == 2
    assert "alerts[0] (NPULowUtilization): window" in err.getvalue()
    data["alerts"][0]["window"] = "10m"
    bad.write_text(yaml.safe_dump(data))
    err = io.StringIO()
    assert run(argparse.Namespace(thresholds=str(bad), out=str(tmp_path)), io.StringIO(), err) == 2
    assert "NPUSomethingNew: not contract alerts" in err.getvalue()
    assert not (tmp_path / "alerts").exists()


RUNBOOKS = "https://git.example.com/ops/cann-exporter/blob/main/docs/runbooks.md"


def test_runbook_url_reaches_every_alert(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--runbook-url", RUNBOOKS, "--out", str(tmp_path)])
    assert run(args, io.StringIO(), io.StringIO()) == 0
    rules = [r for g in yaml.safe_load((tmp_path / ALERTS_FILE).read_text())["groups"] for r in g["rules"]]
    assert {r["annotations"]["runbook_url"] for r in rules} == {f"{RUNBOOKS}#{r['alert'].lower()}" for r in rules}
    assert len(rules) >= len(CONTRACT_ALERT_NAMES)
    # only the links differ from the committed rules
    committed = (ROOT / ALERTS_FILE).read_text()
    assert (tmp_path / ALERTS_FILE).read_text().replace(RUNBOOKS + "#", "docs/runbooks.md#") == committed


@pytest.mark.parametrize("bad", ["docs/runbooks.md", "https://host/runbooks.md#x", "ftp://host/runbooks.md", "https://a b"])
def test_runbook_url_must_be_an_absolute_link(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--runbook-url", bad])
    assert exc.value.code == 2 and "expected an http(s) URL of the published runbooks" in capsys.readouterr().err


def test_exporter_selector_narrows_the_down_alert_only(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--exporter-selector", 'job="npu", env=~"prod.*"', "--out", str(tmp_path)])
    assert run(args, io.StringIO(), io.StringIO()) == 0
    rules = {r["alert"]: r for r in all_alert_rules(yaml.safe_load((tmp_path / ALERTS_FILE).read_text()))}
    down = rules["CANNExporterDown"]["expr"]
    assert down.count('{job="npu", env=~"prod.*"}') == 3, down  # up, the build info, its absence
    committed = {r["alert"]: r for r in all_alert_rules(yaml.safe_load((ROOT / ALERTS_FILE).read_text()))}
    assert "job=" not in committed["CANNExporterDown"]["expr"]  # default: any job name
    assert {k: v for k, v in rules.items() if k != "CANNExporterDown"} == {k: v for k, v in committed.items() if k != "CANNExporterDown"}


@pytest.mark.parametrize("bad", ['{job="npu"}', "job=npu", 'job="npu",', 'job="a" or up'])
def test_exporter_selector_must_be_label_matchers(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--exporter-selector", bad])
    assert exc.value.code == 2 and "expected PromQL label matchers" in capsys.readouterr().err
    with pytest.raises(ThresholdError, match="exporter_selector: expected PromQL label matchers"):
        parse_thresholds({**yaml.safe_load(DEFAULT_PATH.read_text()), "alerting": {"exporter_selector": bad}})


def test_every_alert_hands_over_to_the_exporter_down_page() -> None:
    """A dead exporter's alerts keep firing past CANNExporterDown's `for:`
    (alerts/tests/cann-exporter.handover.test.yml checks every evaluation of it)."""
    rules = all_alert_rules(yaml.safe_load((ROOT / ALERTS_FILE).read_text()))
    down = next(r for r in rules if r["alert"] == "CANNExporterDown")
    assert "keep_firing_for" not in down and duration_seconds(down["for"]) == 60
    others = [r for r in rules if r["alert"] != "CANNExporterDown"]
    assert {r["alert"] for r in others} == ALL_ALERTS - {"CANNExporterDown"}
    assert {r.get("keep_firing_for") for r in others} == {"2m30s"}
    assert duration_seconds("2m30s") > duration_seconds(down["for"]) + 60  # plus one evaluation at the default 1m
    table = parse_thresholds({**yaml.safe_load(DEFAULT_PATH.read_text()), "alerting": {"handover": "1m"}})
    with pytest.raises(GenerateError, match="handover 1m: must be longer than CANNExporterDown's window 1m"):
        alerts(table)


def test_every_alert_holds_its_firing_state_across_an_outage_of_its_target() -> None:
    """Each alert but the down page is `E or (its own firing series while its target is down,
    within alerting.outage)`: the same alert name and tier, the bound from the table, the
    description saying what is held (alerts/tests/cann-exporter.outage.test.yml checks the
    restarts, the bound and prompt resolutions)."""
    rules = all_alert_rules(yaml.safe_load((ROOT / ALERTS_FILE).read_text()))
    guard = "{{ if printf `up{job=%q, instance=%q} == 0` $labels.job $labels.instance | query }}"
    for rule in rules:
        expr, description = rule["expr"], rule["annotations"]["description"]
        if rule["alert"] == "CANNExporterDown":
            assert "ALERTS" not in expr and guard not in description
            continue
        own = f'ALERTS{{alertname="{rule["alert"]}", alertstate="firing", severity="{rule["labels"]["severity"]}"}}'
        assert expr.count("ALERTS{") == 1 and own in expr, rule["alert"]
        assert expr.endswith(
            f"or\n(\n  max without (alertname, alertstate, severity) ({own})\n  and on (job, instance)\n"
            "  (up == 0 and on (job, instance) max_over_time(up[15m]) == 1)\n)\n"
        ), rule["alert"]
        assert description.startswith(guard) and "for up to 15m after that (alerting.outage)" in description, rule["alert"]
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    assert data["alerting"]["outage"] == "15m"
    longer = {r["alert"]: r for r in all_alert_rules(alerts(parse_thresholds({**data, "alerting": {"outage": "30m"}})))}
    assert "max_over_time(up[30m]) == 1" in longer["NPUNeedsIsolation"]["expr"]
    assert "max_over_time(up[2m]) == 1" in all_alert_rules(alerts(load_thresholds(), windows={"outage": "2m"}))[0]["expr"]
    # 0s: no hold, the rules as they were before it
    off = all_alert_rules(alerts(parse_thresholds({**data, "alerting": {"outage": "0s"}})))
    assert not [r["alert"] for r in off if "ALERTS" in r["expr"] or guard in r["annotations"]["description"]]
    assert [unheld(r) for r in rules] == [r["expr"].rstrip("\n") for r in off]
    with pytest.raises(ThresholdError, match="alerting: outage: expected a duration like 1d, got 'long'"):
        parse_thresholds({**data, "alerting": {"outage": "long"}})


# --- content ---------------------------------------------------------------------------------
def test_every_contract_alert_with_severity_summary_description_and_runbook() -> None:
    doc = yaml.safe_load((ROOT / ALERTS_FILE).read_text())
    rules = all_alert_rules(doc)
    assert {r["alert"] for r in rules} == ALL_ALERTS == set(CONTRACT_ALERTS)
    severities = {name: [r["labels"]["severity"] for r in rules if r["alert"] == name] for name in ALL_ALERTS}
    assert {name: s for name, s in severities.items() if len(s) > 1} == TIERED_ALERTS
    runbook = (ROOT / "docs" / "runbooks.md").read_text()
    headings = {line[3:].strip() for line in runbook.splitlines() if line.startswith("## ")}
    for rule in rules:
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, name
        assert notes["runbook_url"] == f"docs/runbooks.md#{name.lower()}"
        assert name in headings, f"docs/runbooks.md has no section '## {name}'"
        if name not in (
            "CANNExporterDown",
            "NPUUnhealthy",
            "NPUNeedsIsolation",
            "CANNExporterSourceFailing",
            "NPUNetworkLinkDown",
            "NPUNetworkUnhealthy",
            "NPUHCCSLinkDown",
            "CANNExporterSimulated",
        ):  # value is just 0/1
            assert "$value" in notes["description"], name
        needed = {"$labels.instance"}
        if name in JOB_ALERTS:
            needed |= {"$labels.job_name", "$labels.rank"}
        elif name.startswith("NPU") and name != "NPUMissing":
            needed |= {"$labels.device", "$labels.npu", "$labels.chip"}
        missing = {label for label in needed if label not in notes["description"]}
        assert not missing, f"{name}: description lacks {missing}"
        if name in NETWORK_ALERTS:  # the port only where there is one (A5); 910B chips have one port, no label
            port = "{{ with $labels.port }} port {{ . }}{{ end }}"
            assert port in notes["summary"] and port in notes["description"], name


def test_every_runbook_section_has_the_three_parts() -> None:
    text = (ROOT / "docs" / "runbooks.md").read_text()
    sections = text.split("\n## ")[1:]
    assert {s.splitlines()[0].strip() for s in sections} == ALL_ALERTS
    for section in sections:
        name = section.splitlines()[0]
        for part in ("**Meaning**", "**Confirm**", "**Act**"):
            assert part in section, f"{name}: missing {part}"


def test_every_metric_name_in_the_rules_is_known() -> None:
    known = known_names()
    for path in rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                unknown = metric_names(rule["expr"]) - known
                assert not unknown, f"{path.name} {rule.get('alert') or rule.get('record')}: {unknown}"


def test_recording_rule_names_follow_level_metric_operations() -> None:
    doc = yaml.safe_load((ROOT / RECORDING_FILE).read_text())
    records = [r["record"] for g in doc["groups"] for r in g["rules"]]
    for record in records:
        level, metric, operations = record.split(":")
        assert level in (
            "chip",
            "instance",
            "namespace",
            "job_name",
            "job_name_kind",
            "cluster",
            "instance_namespace",
            "instance_job_name",
        ), record
        assert metric.startswith("npu_") and operations, record
    # per chip, per node, per namespace and cluster-wide, at 5m and 1h, plus daily rollups
    for level in ("instance", "namespace", "cluster"):
        for window in ("5m", "1h"):
            assert f"{level}:npu_aicore_utilization_ratio:avg{window}" in records
            assert f"{level}:npu_aicore_utilization_ratio:quantile_avg{window}" in records
        assert f"{level}:npu_aicore_utilization_ratio:avg1d" in records
    for name in (
        "chip:npu_aicore_utilization_ratio:avg5m",
        "chip:npu_aicore_utilization_ratio:avg1h",
        "cluster:npu_idle_chip_hours:sum1d",
        "cluster:npu_allocation:ratio",
        "cluster:npu_hbm_headroom_bytes:sum",
        "cluster:npu_chip_hours:sum1d",
        "instance:npu_hbm_usage:max1d",
    ):
        assert name in records


def test_a_recording_rule_follows_the_rules_of_its_group_it_reads() -> None:
    """Prometheus evaluates a group's rules in order: a rule reading a series recorded in its
    own group must come after it, or it reads the previous evaluation's value."""
    doc = yaml.safe_load((ROOT / RECORDING_FILE).read_text())
    for group in doc["groups"]:
        records = [r["record"] for r in group["rules"]]
        for index, rule in enumerate(group["rules"]):
            reads = set(re.findall(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", rule["expr"])) & set(records)
            assert all(records.index(name) < index for name in reads), (group["name"], rule["record"], reads)
    rollups = [r["record"] for r in doc["groups"][1]["rules"]]
    assert (
        rollups.index("chip:npu_hbm_usage:max1d")
        < rollups.index("instance:npu_hbm_usage:max1d")
        < rollups.index("cluster:npu_hbm_usage:max1d")
    )


def test_chip_hours_add_up_evaluations_at_the_rollup_interval() -> None:
    for interval, seconds, day in (("1m", "60", "23h59m30s"), ("1s", "1", "23h59m59s500ms"), ("5m", "300", "23h57m30s")):
        groups = recording_rules(load_thresholds(), windows={"rollup_interval": interval})["groups"]
        records = {r["record"]: r["expr"] for r in groups[1]["rules"]}
        assert records["instance:npu_idle_chip_hours:sum1d"] == f"sum_over_time(instance:npu_chips_idle:sum[{day}]) * {seconds} / 3600"
        assert f"timestamp(npu_up offset {interval}) < {int(seconds) * 2}" in records["instance:npu_chips_observed:count"]
        assert "24 *" not in "".join(records.values())


# --- the table drives the rules ----------------------------------------------------------------
def _table(changes: dict[tuple[int, str], object]):
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    for (index, key), value in changes.items():
        data["indicators"][index][key] = value
    return parse_thresholds(data)


def test_thresholds_and_windows_come_from_the_table() -> None:
    table = _table({(0, "abnormal"): 0.5, (0, "window"): "30m", (3, "abnormal"): 0.25})
    rules = {r["alert"]: r for r in all_alert_rules(alerts(table))}
    assert "< 0.5\n" in rules["NPULowUtilization"]["expr"] and rules["NPULowUtilization"]["for"] == "30m"
    assert "below 50%" in rules["NPULowUtilization"]["annotations"]["description"]
    assert "> 0.25\n" in rules["NPUMemcpyHigh"]["expr"]
    records = {r["record"]: r for g in recording_rules(table)["groups"] for r in g["rules"]}
    assert "< bool 0.5" in records["instance:npu_chips_low_utilization:sum"]["expr"]


def test_windows_override_for_short_test_runs() -> None:
    short = {r["alert"]: r for r in all_alert_rules(alerts(load_thresholds(), windows={"window": "5s", "range": "10s"}))}
    assert short["NPULowUtilization"]["for"] == "5s"
    assert "[10s]" in short["NPULowUtilization"]["expr"] and "[5m]" not in short["NPULowUtilization"]["expr"]
    assert "for" not in short["NPUECCDoubleBitErrors"], "an alert that fires at once stays so"
    one = {
        r["alert"]: r
        for r in all_alert_rules(
            alerts(
                load_thresholds(), windows={"window": "5s", "NPUUtilizationUnstable.window": "60s", "NPUUtilizationUnstable.range": "60s"}
            )
        )
    }
    assert (one["NPULowUtilization"]["for"], one["NPUUtilizationUnstable"]["for"]) == ("5s", "60s")
    assert "[60s]" in one["NPUUtilizationUnstable"]["expr"] and "[5m]" in one["NPULowUtilization"]["expr"]
    assert "offset 1d" in short["NPUIterationTimeRegression"]["expr"], "params are overridden only by name"
    assert (
        "offset 2h"
        in {r["alert"]: r for r in all_alert_rules(alerts(load_thresholds(), windows={"baseline": "2h"}))}["NPUIterationTimeRegression"][
            "expr"
        ]
    )
    groups = recording_rules(load_thresholds(), windows={"rollup_interval": "1s"})["groups"]
    assert groups[1]["interval"] == "1s"
    with pytest.raises(ValueError):
        alerts(load_thresholds(), windows={"window": "soon"})


def test_an_alert_left_out_of_the_table_is_not_generated() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["alerts"] = [a for a in data["alerts"] if a["alert"] != "NPUHBMAlmostFull"]
    names = {r["alert"] for r in all_alert_rules(alerts(parse_thresholds(data)))}
    assert names == ALL_ALERTS - {"NPUHBMAlmostFull"}


def test_alert_entries_are_validated() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    data["alerts"][1]["indicator"] = "nope"
    data["alerts"][2]["severity"] = "page"
    data["alerts"][3]["params"] = {"x": {"nested": 1}}
    data["alerts"][4]["colour"] = "red"
    data["alerts"].append(dict(data["alerts"][5]))
    data["alerting"] = {"profile_max_age": "old"}
    data["recording"] = {"quantiles": [1.5]}
    with pytest.raises(ThresholdError) as err:
        parse_thresholds(data, "t.yaml")
    text = "\n".join(err.value.problems)
    for expected in (
        "alerts[1] (NPUUtilizationUnstable): indicator: no indicator 'nope'",
        "alerts[2] (NPUHotOperator): severity",
        "alerts[3] (NPUTopOperatorsDominant): params.x",
        "alerts[4] (NPUMemcpyHigh): unknown key 'colour'",
        "duplicate alert 'NPUFrameworkOverheadHigh'",
        "alerting: profile_max_age",
        "recording: quantiles",
    ):
        assert expected in text
    table = load_thresholds()
    low = table.alert("NPULowUtilization")
    assert (low.threshold, low.window, low.severity, low.range) == (0.6, "10m", "warning", "5m"), "taken from the indicator"
    assert table.alert("NPUHotOperator").threshold == 0.7 and table.alert("NPUTopOperatorsDominant").threshold == 0.5


def test_a_threshold_is_needed_where_the_expression_compares() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    entry = next(a for a in data["alerts"] if a["alert"] == "NPUTemperatureHigh")
    del entry["threshold"]
    with pytest.raises(GenerateError, match="NPUTemperatureHigh: needs a threshold"):
        alerts(parse_thresholds(data))


def test_network_thresholds_come_from_the_table() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    entry = {a["alert"]: a for a in data["alerts"]}
    entry["NPUNetworkLinkDown"]["window"] = "30s"
    entry["NPUNetworkLinkFlapping"].update(threshold=5, range="1h")
    entry["NPUNetworkErrors"].update(threshold=1, window="20m", range="10m")
    entry["NPUNetworkErrors"]["params"]["kinds"] = ["fcs", "crc"]
    entry["NPUNetworkPFCStorm"].update(threshold=20000, range="2m")
    entry["NPUOpticalPowerOutOfRange"]["params"].update(rx_power_low=0.0001, tx_power_high=0.004)
    entry["NPUOpticalTemperatureHigh"]["threshold"] = 75
    entry["NPUNetworkUnhealthy"]["params"]["ok_states"] = ["Success"]
    rules = {r["alert"]: r for r in all_alert_rules(alerts(parse_thresholds(data)))}
    assert rules["NPUNetworkLinkDown"]["for"] == "30s"
    flap = rules["NPUNetworkLinkFlapping"]
    assert "_total[1h])" in flap["expr"] and ") >= 5\n" in flap["expr"] and "for" not in flap
    errors = rules["NPUNetworkErrors"]
    assert 'kind=~"fcs|crc"}[10m]' in errors["expr"] and "> 1\n" in errors["expr"] and errors["for"] == "20m"
    assert "kinds fcs, crc), above 1/s for 20m" in errors["annotations"]["description"]
    assert '{kind="pfc"}[2m]' in rules["NPUNetworkPFCStorm"]["expr"] and "> 20000\n" in rules["NPUNetworkPFCStorm"]["expr"]
    power = rules["NPUOpticalPowerOutOfRange"]
    assert "npu_optical_rx_power_watts < 0.0001 or npu_optical_rx_power_watts > 0.0035481" in power["expr"]
    assert "npu_optical_tx_power_watts < 0.0002818 or npu_optical_tx_power_watts > 0.004" in power["expr"]
    assert "0.1 mW to 3.5481 mW (-10.0 to +5.5 dBm)" in power["annotations"]["description"]
    assert "0.2818 mW to 4 mW (-5.5 to +6.0 dBm)" in power["annotations"]["description"]
    assert "> 75\n" in rules["NPUOpticalTemperatureHigh"]["expr"]
    assert 'state!~"Success"}' in rules["NPUNetworkUnhealthy"]["expr"]


def test_network_params_are_checked() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    entry = {a["alert"]: a for a in data["alerts"]}
    entry["NPUOpticalPowerOutOfRange"]["params"]["rx_power_high"] = 0.0001
    with pytest.raises(GenerateError, match="NPUOpticalPowerOutOfRange: params.rx_power_low and params.rx_power_high"):
        alerts(parse_thresholds(data))
    del entry["NPUOpticalPowerOutOfRange"]["params"]["rx_power_high"]
    with pytest.raises(GenerateError, match="NPUOpticalPowerOutOfRange"):
        alerts(parse_thresholds(data))
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    next(a for a in data["alerts"] if a["alert"] == "NPUNetworkErrors")["params"]["kinds"] = ["fcs", "roce.*"]
    with pytest.raises(GenerateError, match="NPUNetworkErrors: params.kinds"):
        alerts(parse_thresholds(data))
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    del next(a for a in data["alerts"] if a["alert"] == "NPUNetworkPFCStorm")["range"]
    with pytest.raises(GenerateError, match="NPUNetworkPFCStorm: needs a range"):
        alerts(parse_thresholds(data))


def test_page_isolation_takes_its_numbers_from_the_table() -> None:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    entry = next(a for a in data["alerts"] if a["alert"] == "NPUMemoryPagesIsolated")
    entry.update(threshold=2, range="6h")
    entry["params"]["critical_pages"] = 500
    warning, critical = (r for r in all_alert_rules(alerts(parse_thresholds(data))) if r["alert"] == "NPUMemoryPagesIsolated")
    assert (warning["labels"]["severity"], critical["labels"]["severity"]) == ("warning", "critical")
    assert "min_over_time(npu_ecc_isolated_pages[6h])\n) > 2\nunless" in warning["expr"]
    assert critical["expr"].startswith("sum without (memory, type) (npu_ecc_isolated_pages) > 500\n")
    assert unheld(critical) in unheld(warning).replace("\n  ", "\n")  # the warning excludes every critical chip
    assert "more than 500 pages" in critical["annotations"]["description"]
    entry["params"]["critical_pages"] = -1
    with pytest.raises(GenerateError, match="NPUMemoryPagesIsolated: params.critical_pages"):
        alerts(parse_thresholds(data))


# --- promtool ---------------------------------------------------------------------------------
def test_promtool_check_rules_on_every_rule_file() -> None:
    files = rule_files()
    assert len(files) >= 2
    result = subprocess.run(
        [tool("promtool"), "check", "rules", *map(str, files)], check=False, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_rules_on_a_short_window_variant(tmp_path: Path) -> None:
    files = render(load_thresholds(), windows={"window": "5s", "range": "10s", "rollup_interval": "1s"})
    write(tmp_path, {k: v for k, v in files.items() if k.startswith("alerts/")})
    result = subprocess.run(
        [tool("promtool"), "check", "rules", *map(str, sorted((tmp_path / "alerts").glob("*.yml")))],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("test_file", sorted(p.name for p in (ROOT / "alerts" / "tests").glob("*.yml")))
def test_promtool_unit_tests(test_file: str) -> None:
    result = subprocess.run(
        [tool("promtool"), "test", "rules", str(ROOT / "alerts" / "tests" / test_file)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_promtool_cases_firing_and_not_firing() -> None:
    """Each alert appears in the unit tests (alerts/tests/*.yml on the alerting rules) both
    with expected alerts and with none."""
    firing, quiet = set(), set()
    for path in sorted((ROOT / "alerts" / "tests").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        if "../cann-exporter.alerts.yml" not in doc["rule_files"]:
            continue
        for test in doc["tests"]:
            for case in test.get("alert_rule_test", []):
                (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert firing == ALL_ALERTS
    assert quiet == ALL_ALERTS
