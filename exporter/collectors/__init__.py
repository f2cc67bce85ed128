"""Collectors: snapshot -> metric families. They never run a subprocess or do I/O."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from exporter.metrics import MetricSpec


def family(spec: MetricSpec) -> Metric:
    """An empty family for ``spec`` with its labels and help text."""
    if spec.kind == "counter":
        return CounterMetricFamily(spec.family_name, spec.help, labels=spec.labels)
    if spec.kind == "histogram":
        return HistogramMetricFamily(spec.family_name, spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.family_name, spec.help, labels=spec.labels)


def label(value: object) -> str:
    """Label text; unknown becomes the empty string (which Prometheus treats as absent)."""
    return "" if value is None else str(value)
