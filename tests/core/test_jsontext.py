"""parse_json's bounds hold on every shape, with or without its shortcuts (no long digit run:
no per-integer check; lists of flat lists: counted without a walk)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.core.jsontext import MAX_DEPTH, MAX_INT_DIGITS, JsonRefused, parse_json

scalars = st.none() | st.booleans() | st.integers(-(10**40), 10**40) | st.floats(allow_nan=False) | st.text(max_size=5)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3))


def depth(doc: Any) -> int:
    if isinstance(doc, dict):
        return 1 + max((depth(v) for v in doc.values()), default=0)
    if isinstance(doc, list):
        return 1 + max((depth(v) for v in doc), default=0)
    return 0


def longest_int(doc: Any) -> int:
    if isinstance(doc, bool):
        return 0
    if isinstance(doc, int):
        return len(str(abs(doc)))
    children = doc.values() if isinstance(doc, dict) else doc if isinstance(doc, list) else ()
    return max((longest_int(v) for v in children), default=0)


def wrapped(doc: Any, levels: int) -> Any:
    for _ in range(levels):
        doc = [doc]
    return doc


@settings(max_examples=300, deadline=None)
@given(documents, st.integers(0, MAX_DEPTH + 2))
def test_refused_exactly_when_too_deep_or_an_integer_too_long(doc: Any, levels: int) -> None:
    doc = wrapped(doc, levels)
    text = json.dumps(doc)
    if longest_int(doc) > MAX_INT_DIGITS:
        with pytest.raises(JsonRefused) as refused:
            parse_json(text.encode(), "test")
        assert refused.value.reason == "bad_number"
    elif depth(doc) > MAX_DEPTH:
        with pytest.raises(JsonRefused) as refused:
            parse_json(text.encode(), "test")
        assert refused.value.reason == "too_deep"
    else:
        assert parse_json(text.encode(), "test") == json.loads(text)


@pytest.mark.parametrize("levels", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH])
def test_points_at_the_depth_limit(levels: int) -> None:
    """A series' points (a list of flat lists) at each depth around the limit: the shortcut
    counts their level as the walk would."""
    points = [[1_700_000_000 + i, "0.5"] for i in range(3)]
    doc = wrapped(points, levels)  # points nest 2 levels: levels + 2 in all
    if levels + 2 > MAX_DEPTH:
        with pytest.raises(JsonRefused, match="nested more than"):
            parse_json(json.dumps(doc), "test")
    else:
        assert parse_json(json.dumps(doc), "test") == doc


def test_a_long_digit_run_inside_a_string_is_read() -> None:
    doc = {"label": "9" * 100, "values": [[1, "1" * 40]]}
    assert parse_json(json.dumps(doc).encode("utf-16"), "test") == doc
