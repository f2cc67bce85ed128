"""How a package declares its metrics and renders them: specs in, prometheus_client families out.

A :class:`MetricSpec` is the one definition of a metric (name, type, help, labels) and names
the field of its package's snapshot part that fills it; collectors, generators, docs and
tests all read the specs. The render helpers below are what collectors build families with:
they never see a subprocess or a file, only the immutable part they are handed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

T = TypeVar("T")
P = TypeVar("P", contravariant=True)

# Every per-chip series carries exactly these labels: the NPU id npu-smi prints (the `-i`
# argument), the chip index within the card, and the chip logic id frameworks use.
CHIP_LABELS = ("npu", "chip", "device")
LEGACY_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass(frozen=True)
class MetricSpec:
    name: str  # full exposition name (counters end in _total)
    kind: str  # gauge, counter, histogram
    help: str
    labels: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()  # the part's fields that fill it (values, or label values)

    def __post_init__(self) -> None:
        # Classic names only (no colons: those are for recording rules): every scraper reads
        # them, and the exposition encodes them without escaping (node/exposition.py).
        for name in (self.name, *self.labels):
            if not LEGACY_NAME.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"{self.name}: {name!r} is not a classic Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*)")

    @property
    def family_name(self) -> str:
        """Name handed to prometheus_client, which appends `_total` to counters itself."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name

    @property
    def field(self) -> str:
        """The one field whose value a plain per-item family renders."""
        if len(self.fields) != 1:
            raise ValueError(f"{self.name} is filled by {len(self.fields)} fields, not one")
        return self.fields[0]


def spec(name: str, kind: str, help: str, labels: tuple[str, ...] = (), *, field: str | tuple[str, ...]) -> MetricSpec:
    """A MetricSpec filled by ``field`` (one field name, or several for info-style families)."""
    return MetricSpec(name, kind, help, labels, (field,) if isinstance(field, str) else field)


class Collector(Protocol[P]):
    """What every collector is: its specs (for describe and docs) and ``render(part)``."""

    @property
    def specs(self) -> tuple[MetricSpec, ...]: ...  # read-only: a collector's own tuple of specs fits

    def render(self, part: P) -> Iterable[Metric]: ...


# The families a value per label set is added to (a histogram adds buckets and a sum instead).
ValueFamily = GaugeMetricFamily | CounterMetricFamily


def family(spec: MetricSpec) -> ValueFamily:
    """An empty gauge or counter family for ``spec`` with its labels and help text."""
    if spec.kind == "counter":
        return CounterMetricFamily(spec.family_name, spec.help, labels=spec.labels)
    if spec.kind == "histogram":
        raise ValueError(f"{spec.name} is a histogram: use histogram_family")
    return GaugeMetricFamily(spec.family_name, spec.help, labels=spec.labels)


def histogram_family(spec: MetricSpec) -> HistogramMetricFamily:
    """An empty histogram family for ``spec``."""
    return HistogramMetricFamily(spec.family_name, spec.help, labels=spec.labels)


def empty_family(spec: MetricSpec) -> Metric:
    """An empty family of any kind (what a collector's describe() lists)."""
    return histogram_family(spec) if spec.kind == "histogram" else family(spec)


def label(value: object) -> str:
    """Label text; unknown becomes the empty string (which Prometheus treats as absent)."""
    return "" if value is None else str(value)


class OnChip(Protocol):
    """Anything placed on a chip: a chip, a process, a port (read-only: the parts are frozen)."""

    @property
    def npu(self) -> int: ...

    @property
    def chip(self) -> int: ...

    @property
    def device(self) -> int | None: ...


def chip_labels(item: OnChip) -> list[str]:
    """Values of CHIP_LABELS (npu, chip, device)."""
    return [str(item.npu), str(item.chip), label(item.device)]


def field_families(specs: Iterable[MetricSpec], items: Sequence[T], labels_of: Callable[[T], list[str]]) -> Iterator[Metric]:
    """One family per spec: every item's value of the spec's field, skipping None."""
    for spec in specs:
        metric = family(spec)
        field = spec.field
        for item in items:
            value = getattr(item, field)
            if value is not None:
                metric.add_metric(labels_of(item), value)
        yield metric


def part_families(specs: Iterable[MetricSpec], part: object) -> Iterator[Metric]:
    """One family per spec from the part's value of its field: a number is its one sample; for a
    spec with one label, (label value, count) pairs are a sample each."""
    for spec in specs:
        metric = family(spec)
        value = getattr(part, spec.field)
        if spec.labels:
            for key, count in value:
                metric.add_metric([key], count)
        else:
            metric.add_metric([], value)
        yield metric


def stateset(
    spec: MetricSpec,
    states: Sequence[str],
    items: Sequence[T],
    labels_of: Callable[[T], list[str]],
) -> Metric:
    """A gauge stateset from the spec's field: 1 for each item's current state, 0 for the others;
    items whose state is unknown (None) are skipped."""
    metric = family(spec)
    field = spec.field
    for item in items:
        now = getattr(item, field)
        if now is not None:
            for state in states:
                metric.add_metric(labels_of(item) + [state], 1 if state == now else 0)
    return metric


def markdown_table(specs: Iterable[MetricSpec]) -> str:
    """The metric reference table (docs/metrics.md) of ``specs``."""
    rows = ["| metric | type | labels | help |", "|---|---|---|---|"]
    for spec in specs:
        labels = ", ".join(f"`{name}`" for name in spec.labels)
        rows.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.help} |")
    return "\n".join(rows) + "\n"
