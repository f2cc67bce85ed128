"""docs/metrics.md is generated from the metric specs (one source of truth) and current; names follow the contract."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry

from exporter.app.catalogue import ALL_METRICS, metrics_doc
from exporter.app.settings import build_settings
from exporter.node.assembly import assemble
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "metrics.md"


def test_metrics_doc_is_current():
    expected = metrics_doc()
    if os.environ.get("UPDATE_GOLDENS"):
        DOC.write_text(expected)
    assert DOC.read_text() == expected


def test_names_follow_the_contract():
    names = [spec.name for spec in ALL_METRICS]
    assert len(names) == len(set(names))
    for spec in ALL_METRICS:
        # Ours, or the names every Prometheus client library gives a process and its runtime.
        assert spec.name.startswith(("npu_", "cann_exporter_", "process_", "python_")), spec.name
        # The `_total` suffix is for counters only (PromQL users read it as one).
        assert spec.name.endswith("_total") == (spec.kind == "counter"), spec.name
        assert "job" not in spec.labels and "instance" not in spec.labels, spec.name


def test_every_described_metric_is_in_the_contract():
    """What the collectors describe at registration is what the packages declare."""
    exporter = assemble(build_settings(flags={"simulator.scenario": "healthy"}))
    registry: CollectorRegistry = exporter.registry
    described = {name for collector in registry._collector_to_names for name in registry._collector_to_names[collector]}
    declared = {spec.name for spec in ALL_METRICS} | {spec.name.removesuffix("_total") for spec in ALL_METRICS}
    suffixes = ("_created", "_bucket", "_sum", "_count")
    assert described and described <= declared | {f"{n}{s}" for n in declared for s in suffixes}
