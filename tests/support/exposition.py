"""Reading a Prometheus exposition in tests: every sample by (name, labels), and picks from it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def samples(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` whose labels include ``labels``."""
    matches = [v for (n, ls), v in found.items() if n == name and set(labels.items()) <= ls]
    assert len(matches) <= 1, (name, labels, matches)
    return matches[0] if matches else None


def values(found: Samples, name: str, key: str) -> dict[str, float]:
    """Every sample of ``name``, by the value of its label ``key``."""
    return {dict(ls)[key]: v for (n, ls), v in found.items() if n == name}


def exposition(collector: Any, part: Any) -> str:
    """The text format of ``collector.render(part)``, as prometheus_client writes it."""

    class Once:
        def collect(self) -> Iterable[Any]:
            return collector.render(part)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Once())
    return generate_latest(registry).decode()


def render(collector: Any, part: Any) -> Samples:
    """The samples of ``collector.render(part)``."""
    return samples(exposition(collector, part))
