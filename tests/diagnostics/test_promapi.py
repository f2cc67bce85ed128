"""The Prometheus client's reading of range answers: the one-pass conversion of points gives
what the point-by-point one gives, and `ranges` answers in order, sends ahead no more than
IN_FLIGHT queries and stops sending when left."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from exporter.diagnostics.promapi import IN_FLIGHT, PrometheusClient, PrometheusError, Series, _point, _points

numbers = st.integers(-(10**12), 10**12) | st.floats(allow_nan=True, allow_infinity=True)
texts = numbers.map(str) | st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "x", "", " 1 "])
elements = st.one_of(
    st.lists(numbers | texts, min_size=2, max_size=2),  # a point as Prometheus writes it, or close to it
    st.tuples(st.booleans(), numbers | texts).map(list),  # JSON true is not a time
    st.tuples(numbers, st.booleans()).map(list),
    st.lists(numbers | texts | st.booleans() | st.none(), max_size=3),
    st.text(max_size=3),
    st.dictionaries(st.text(max_size=2), numbers, max_size=2),
    st.booleans(),
    numbers,
)


def point_by_point(raw: list[Any]) -> tuple[tuple[float, float], ...]:
    pairs = (_point(p) for p in raw)
    return tuple((t, v) for t, v in pairs if t is not None and v is not None)


pairs = st.tuples(st.integers(0, 2 * 10**9), st.floats(allow_nan=False, allow_infinity=False).map(repr)).map(list)


@settings(max_examples=500, deadline=None)
@example([[1, "2"]], [[True, "1"]], 1)
@given(st.lists(pairs, max_size=6), st.lists(elements, max_size=2), st.integers(0, 6))
def test_points_are_what_point_by_point_reading_gives(good: list[Any], odd: list[Any], at: int) -> None:
    raw = good[:at] + odd + good[at:]  # an answer as Prometheus writes it, with or without odd elements in it
    assert _points(raw) == point_by_point(raw)


def test_a_month_of_points_takes_the_one_pass() -> None:
    raw = [[1_790_000_000 + 3600 * i, f"{i / 720:.4f}"] for i in range(720)]
    assert _points(raw) == point_by_point(raw) and len(_points(raw)) == 720


@dataclass
class Scripted(PrometheusClient):
    """Answers each query with one series named after it, without a network; ``fail`` is
    refused, and the answer of ``slow`` comes last."""

    fail: str = ""
    slow: str = ""
    sent: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        with self.lock:
            self.sent.append(query)
        if query == self.slow:
            time.sleep(0.2)
        if query == self.fail:
            raise PrometheusError(f"refused: {query}")
        return [Series({"query": query}, ((end, 1.0),))]


QUERIES = [f"q{i}" for i in range(10)]


def test_answers_come_in_the_order_asked() -> None:
    client = Scripted("http://127.0.0.1:1", slow="q0")
    with client.ranges(QUERIES, 0.0, 60.0, 60.0) as answers:
        got = [a[0].labels["query"] for a in answers]
    assert got == QUERIES and sorted(client.sent) == sorted(QUERIES)


def test_leaving_early_sends_no_more() -> None:
    client = Scripted("http://127.0.0.1:1")
    with client.ranges(QUERIES, 0.0, 60.0, 60.0) as answers:
        assert next(answers)[0].labels["query"] == "q0"
    assert len(client.sent) <= 1 + IN_FLIGHT, client.sent


def test_a_refused_query_raises_at_its_turn() -> None:
    client = Scripted("http://127.0.0.1:1", fail="q3")
    taken = []
    with pytest.raises(PrometheusError, match="refused: q3"), client.ranges(QUERIES, 0.0, 60.0, 60.0) as answers:
        for answer in answers:
            taken.append(answer[0].labels["query"])
    assert taken == ["q0", "q1", "q2"]
    assert len(client.sent) <= 4 + IN_FLIGHT, client.sent
