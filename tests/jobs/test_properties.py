"""Property: whatever a client POSTs, parse_batch returns a Batch or raises IngestError - and
an accepted Batch folds into the store without raising (only the store's own 429)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.jobs.store import IngestStore
from exporter.jobs.validate import Batch, IngestError, IngestLimits, parse_batch

NOW = 1_780_000_000.0
LIMITS = IngestLimits(max_body_bytes=64 << 10, max_steps=50)

_NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, NOW, NOW + 1e6, 86_400, 86_401, 2**53, True, False]),
)
_STRINGS = st.one_of(st.text(max_size=40), st.sampled_from(["bert", "3", "data", "h2d", "compute", "pytorch", "a" * 200]))
_LEAF = st.one_of(st.none(), _NUMBERS, _STRINGS)
_KEYS = st.sampled_from(
    [
        "job_name",
        "rank",
        "world_size",
        "device",
        "framework",
        "pid",
        "dropped",
        "final",
        "memory",
        "steps",
        "duration",
        "end",
        "samples",
        "phases",
        "data",
        "compute",
        "allocated_bytes",
        "max_allocated_bytes",
        "other",
        "x",
    ]
)
_JSON = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_KEYS, inner, max_size=8)), max_leaves=40)
_STEP = st.fixed_dictionaries(
    {"duration": _NUMBERS}, optional={"end": _NUMBERS, "samples": _NUMBERS, "phases": st.dictionaries(_KEYS, _NUMBERS, max_size=4)}
)
_BATCH = st.fixed_dictionaries(
    {"job_name": _STRINGS, "rank": _NUMBERS, "steps": st.lists(_STEP, max_size=5)},
    optional={
        "world_size": _NUMBERS,
        "device": _LEAF,
        "framework": _STRINGS,
        "pid": _NUMBERS,
        "dropped": _NUMBERS,
        "final": _LEAF,
        "memory": st.one_of(_LEAF, st.dictionaries(_KEYS, _NUMBERS, max_size=3)),
    },
)


def _check(body: bytes) -> None:
    try:
        batch = parse_batch(body, LIMITS, NOW)
    except IngestError as exc:
        assert 400 <= exc.status < 500 and exc.reason and exc.message
        return
    assert isinstance(batch, Batch)
    assert all(math.isfinite(s.duration) and s.duration >= 0 for s in batch.steps)
    store = IngestStore(limits=LIMITS, clock=lambda: NOW)
    try:
        store.accept(batch)
    except IngestError as exc:
        assert exc.status == 429
    store.part()


def _dump(doc: object) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_BATCH)
@example(doc={"job_name": "bert", "rank": 0, "steps": [{"duration": 1e308 * 10}]})  # Infinity in JSON
@example(doc={"job_name": "bert", "rank": 0, "world_size": 2**70, "steps": []})
@example(doc={"job_name": "bert", "rank": True, "steps": []})
@example(doc={"job_name": "bert", "rank": 0, "steps": [{"duration": 0.1, "end": 2**1100}]})  # int beyond float range
def test_batch_shaped_bodies(doc):
    _check(_dump(doc))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_JSON)
def test_any_json_body(doc):
    _check(_dump(doc))


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
@example(body=b"[" * 100_000)  # deep nesting: RecursionError inside json
@example(body=b'{"job_name": "bert", "rank": 0, "steps": [], "steps": 1}')
@example(body=b"\xef\xbb\xbf{}")  # a UTF-8 BOM
@example(body=b"1" * 5000)  # an int past Python's digit limit
def test_any_bytes(body):
    _check(body)


def test_regression_integers_beyond_float_range_are_rejected_not_crashing():
    """Found by the properties above: `float(2**1100)` raised OverflowError out of parse_batch (a 500)."""
    for step in ({"duration": 0.1, "end": 2**1100}, {"duration": 2**1100}, {"duration": 0.1, "phases": {"data": 2**1100}}):
        body = _dump({"job_name": "bert", "rank": 0, "steps": [step]})
        try:
            parse_batch(body, LIMITS, NOW)
        except IngestError as exc:
            assert exc.status == 400 and exc.reason in ("invalid", "out_of_range")
        else:
            raise AssertionError(f"accepted {step}")
