"""PromQL helpers for the rule and dashboard tests: which metric names an expression reads,
and which names exist (the collectors' specs, their histogram series, the recording rules,
and the few series Prometheus itself makes)."""

from __future__ import annotations

import re

import promql_parser

from exporter.app.catalogue import ALL_METRICS
from exporter.generate.recording import record_names
from exporter.thresholds.table import load_thresholds

# Series Prometheus makes itself (scrape health), allowed in rules and dashboards.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "ALERTS"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# Grafana variables and what the tests put in their place (an "All" selection is `.*`).
GRAFANA_VARIABLES = {
    "$__rate_interval": "10s",
    "$__interval": "5s",
    "$__range": "1h",
    "$datasource": "prometheus",
    "$job_name": ".*",
    "$instance": ".*",
    "$device": ".*",
    "$job": ".*",
    "$node": ".*",
    "$price_per_kwh": "0.15",
}


def exposed_names() -> set[str]:
    names = set()
    for spec in ALL_METRICS:
        names.add(spec.name)
        if spec.kind == "histogram":
            names.update(spec.name + suffix for suffix in HISTOGRAM_SUFFIXES)
    return names


def known_names() -> set[str]:
    return exposed_names() | set(record_names(load_thresholds())) | PROMETHEUS_SERIES


def substitute(expr: str) -> str:
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def label_values_query(query: str) -> tuple[str, str]:
    """Grafana's `label_values(selector, label)` as (PromQL selector, label)."""
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip(), re.DOTALL)
    assert match, f"not a label_values() query: {query!r}"
    return match.group(1), match.group(2)


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def metric_names(expr: str) -> set[str]:
    """Every metric name ``expr`` selects; `{__name__=~"a|b"}` counts as a and b."""
    names: set[str] = set()
    for sel in selectors(expr):
        if sel.name:
            names.add(sel.name)
            continue
        for matcher in sel.matchers.matchers:
            if matcher.name == "__name__":
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:|]*", matcher.value), f"name regex too loose: {matcher.value!r}"
                names.update(matcher.value.split("|"))
    assert names, f"selects no metric by name: {expr!r}"
    return names
