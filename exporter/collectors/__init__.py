"""Collectors: snapshot -> metric families. They never run a subprocess or do I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from exporter.metrics import MetricSpec

T = TypeVar("T")


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


class OnChip(Protocol):
    """Anything placed on a chip: a chip, a process, a port."""

    npu: int
    chip: int
    device: int | None


def chip_labels(item: OnChip) -> list[str]:
    """Values of metrics.CHIP_LABELS (npu, chip, device)."""
    return [str(item.npu), str(item.chip), label(item.device)]


def field_families(
    specs: Iterable[tuple[MetricSpec, str]], items: Sequence[T], labels_of: Callable[[T], list[str]]
) -> Iterator[Metric]:
    """One family per (spec, field name): every item's value of that field, skipping None."""
    for spec, field in specs:
        metric = family(spec)
        for item in items:
            value = getattr(item, field)
            if value is not None:
                metric.add_metric(labels_of(item), value)
        yield metric


def stateset(
    spec: MetricSpec, states: Sequence[str], items: Sequence[T],
    labels_of: Callable[[T], list[str]], current: Callable[[T], str | None],
) -> Metric:
    """A gauge stateset: 1 for each item's current state, 0 for the others; unknown items skipped."""
    metric = family(spec)
    for item in items:
        now = current(item)
        if now is not None:
            for state in states:
                metric.add_metric(labels_of(item) + [state], 1 if state == now else 0)
    return metric
