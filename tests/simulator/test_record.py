"""The simulator's frozen records behave as the frozen dataclasses they replace (without
importing dataclasses: every simulated call imports the simulator)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exporter.simulator.models import MODELS, BoardSpec
from exporter.simulator.record import FrozenInstanceError, Record, replace
from tests.support.paths import ROOT


class Point(Record):
    x: int
    y: int = 0
    label: str | None = None


class Named(Record, kw_only=True):
    name: str
    size: int = 1


def test_fields_in_order_with_defaults():
    assert Point(1) == Point(x=1, y=0, label=None)
    assert Point(1, 2, "a").label == "a" and Point(1, 2, "a").y == 2
    assert repr(Point(1, label="a")) == "Point(x=1, y=0, label='a')"


def test_wrong_arguments_are_type_errors():
    for make in (lambda: Point(), lambda: Point(1, 2, "a", 4), lambda: Point(1, x=2), lambda: Point(1, z=3), lambda: Named("n")):
        with pytest.raises(TypeError):
            make()
    assert Named(name="n").size == 1


def test_equality_and_hash_are_over_the_fields_of_one_class():
    assert Point(1, 2) == Point(1, 2) and hash(Point(1, 2)) == hash(Point(1, 2))
    assert Point(1, 2) != Point(2, 1)
    assert Point(1, 0) != Named(name="x") and Point(1) != (1, 0, None)
    assert len({Point(1), Point(1), Point(2)}) == 2


def test_frozen():
    point = Point(1)
    with pytest.raises(FrozenInstanceError):
        point.x = 2
    with pytest.raises(AttributeError):
        del point.y


def test_replace_changes_some_fields_only():
    point = Point(1, 2, "a")
    assert replace(point, y=5) == Point(1, 5, "a") and point == Point(1, 2, "a")
    with pytest.raises(TypeError):
        replace(point, z=1)
    board = MODELS["a3"].board
    assert isinstance(board, BoardSpec) and replace(board, model="X").model == "X"
    assert replace(MODELS["910b3"], processes_per_chip=3).chips == MODELS["910b3"].chips


def test_a_simulated_call_imports_no_costly_module():
    """What made each simulated call cost three times a bare interpreter: dataclasses (with
    inspect, re, ast), typing, collections, functools and hashlib's OpenSSL bindings."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        "import exporter.simulator.npusmi, exporter.simulator.hccn; print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30, check=True)
    loaded = set(done.stdout.split())
    costly = {"dataclasses", "inspect", "re", "ast", "typing", "collections", "functools", "hashlib", "_hashlib", "json", "enum"}
    assert not loaded & costly, loaded & costly
