"""Prometheus alerting rules from the threshold table: pure functions, plain data.

Every number an expression compares with, and every window, comes from the table
(exporter/thresholds/thresholds.yaml); the PromQL shapes live in one module per rule group, one
builder per contract alert: chip_rules.py (npu-smi's chips), interconnect_rules.py (PCIe, HCCS,
SIO, sensors), training_rules.py (training jobs), network_rules.py (hccn_tool's ports) and
exporter_rules.py (the exporter itself). This module puts them together: the groups, what each
alert needs from the table, and the rule around each builder's expression.
Label conventions: the exporter's series carry `npu`, `chip`, `device` (chips) or
`job_name`, `rank` (training jobs); Prometheus adds the target labels `job` and `instance`.
Joins and aggregations name `job` and `instance` explicitly so that any further target
labels (a ServiceMonitor's `pod`, `service`, ...) never split a node or a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from exporter.generate import chip_rules, exporter_rules, interconnect_rules, network_rules, training_rules
from exporter.generate.common import Built, Tier, with_windows
from exporter.generate.handover import HANDS_OVER_TO, handover_problem, held_description, with_hold
from exporter.generate.job_alerts import not_finished, on_device
from exporter.thresholds.table import AlertSpec, GenerateError, Thresholds, duration_seconds

# The rule groups in file order.
_MODULES = (chip_rules, interconnect_rules, training_rules, network_rules, exporter_rules)
BUILDERS: dict[str, Callable[[AlertSpec, Thresholds], Built | list[Tier]]] = {
    name: builder for module in _MODULES for name, builder in module.BUILDERS.items()
}
CONTRACT_ALERTS = tuple(BUILDERS)
GROUPS = tuple(module.GROUP for module in _MODULES)
# Alerts about a training rank (job_name, rank): they carry the rank's device (npu_job_info).
JOB_ALERTS = training_rules.GROUP[1]
# Thresholds that need a value for the expression to make sense.
_NEEDS_THRESHOLD = set(CONTRACT_ALERTS).difference(*(module.NO_THRESHOLD for module in _MODULES))
_NEEDS_RANGE = set().union(*(module.NEEDS_RANGE for module in _MODULES))


def job_lookback(table: Thresholds) -> str:
    """The longest range a job alert rates over: how long after a finish its rates still read."""
    ranges = [s.range for s in table.alerts if s.alert in JOB_ALERTS and s.range is not None]
    return max(ranges, key=duration_seconds, default="5m")


def runbook_url(table: Thresholds, alert: str) -> str:
    return f"{table.alerting.runbook_url}#{alert.lower()}"


def alert_rules(spec: AlertSpec, table: Thresholds) -> list[dict[str, Any]]:
    """The rule of one alert, or its rules when it pages at two severities."""
    builder = BUILDERS.get(spec.alert)
    if builder is None:
        raise GenerateError(f"alert {spec.alert}: not a contract alert; the generator knows {', '.join(CONTRACT_ALERTS)}")
    if spec.alert in _NEEDS_THRESHOLD and spec.threshold is None:
        raise GenerateError(f"alert {spec.alert}: needs a threshold (set one, or an indicator with a bound)")
    if spec.alert in _NEEDS_RANGE and spec.range is None:
        raise GenerateError(f"alert {spec.alert}: needs a range")
    built = builder(spec, table)
    tiers = built if isinstance(built, list) else [Tier(spec.severity, built)]
    if spec.alert in JOB_ALERTS:
        lookback = job_lookback(table)
        tiers = [Tier(t.severity, (on_device(not_finished(t.built[0], lookback)), *t.built[1:])) for t in tiers]
    return [rule(spec, table, tier) for tier in tiers]


def rule(spec: AlertSpec, table: Thresholds, tier: Tier) -> dict[str, Any]:
    """The rule of one tier. Every alert but the down page hands over to it (keep_firing_for) and
    holds across an outage of its target (handover.py: a restart continues it, no "resolved")."""
    expr, summary, description = tier.built
    if spec.alert != HANDS_OVER_TO:
        expr = with_hold(expr, spec.alert, tier.severity, table.alerting.outage)
        description = held_description(description, table.alerting.outage)
    out: dict[str, Any] = {"alert": spec.alert, "expr": expr + "\n"}
    if duration_seconds(spec.window) > 0:
        out["for"] = spec.window
    if spec.alert != HANDS_OVER_TO:
        out["keep_firing_for"] = table.alerting.handover
    out["labels"] = {"severity": tier.severity}
    out["annotations"] = {"summary": summary, "description": description, "runbook_url": runbook_url(table, spec.alert)}
    return out


def alerts(table: Thresholds, *, windows: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The alerting rule file (``{"groups": [...]}``) for every alert in the table."""
    table = with_windows(table, windows)
    specs = {spec.alert: spec for spec in table.alerts}
    unknown = sorted(set(specs) - set(CONTRACT_ALERTS))
    if unknown:
        raise GenerateError(f"alerts {', '.join(unknown)}: not contract alerts; the generator knows {', '.join(CONTRACT_ALERTS)}")
    problem = handover_problem(table)
    if problem:
        raise GenerateError(problem)
    groups = []
    for name, members in GROUPS:
        rules = [r for m in members if m in specs for r in alert_rules(specs[m], table)]
        if rules:
            groups.append({"name": name, "rules": rules})
    return {"groups": groups}
