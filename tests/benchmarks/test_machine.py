"""The machine table of the benchmark and soak reports says what a reader elsewhere can compare."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.__main__ import interpreter, machine
from tests.support.paths import ROOT


def test_the_table_names_no_local_path():
    table = machine()
    assert {"CPU", "Cores", "Memory", "Python", "OS", "Packages"} <= table.keys()
    text = "\n".join(table.values())
    assert str(ROOT.resolve()) not in text and str(Path.home()) + "/" not in text
    assert sys.executable not in text


def test_a_venv_inside_the_checkout_is_named_relative_to_it():
    described = interpreter()
    if sys.prefix != sys.base_prefix and Path(sys.prefix).resolve().is_relative_to(ROOT.resolve()):
        assert described == f"venv {Path(sys.prefix).resolve().relative_to(ROOT.resolve()).as_posix()}"
    else:
        assert described.startswith(("venv ", "system interpreter"))
    assert not described.split(" ")[-1].startswith("/")
