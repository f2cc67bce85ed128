"""How `make test` shares the suite between two pytest-xdist workers (tests/support/groups.py): a
file or a server-sharing package stays on one worker, the end-to-end stacks run one after
another on one worker before anything else there. Checked on a tiny project of the same layout
run by a pytest of its own with two workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.groups import PACKAGES, STACK_FILES, STACKS, SuiteScheduling, unit_of
from tests.support.paths import ROOT

# Each test appends (worker, its node id) to a log, one line per test, in the order run.
RECORDING_TEST = """import os

def test_{n}(request):
    with open(os.environ["RUN_LOG"], "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + " " + request.node.nodeid + "\\n")
"""
CONFTEST = "from tests.conftest import pytest_xdist_make_scheduler  # noqa: F401\n"


def test_units() -> None:
    assert {unit_of(f"{path}::test_x[a::b]") for path in STACK_FILES} == {STACKS}
    assert unit_of("tests/diagnostics/test_report.py::test_x") == unit_of("tests/diagnostics/test_units.py::T::test_y") == PACKAGES[0]
    assert unit_of("tests/npusmi/test_faults.py::test_x") == "tests/npusmi/test_faults.py"
    assert all((ROOT / path).is_file() for path in STACK_FILES) and all((ROOT / package).is_dir() for package in PACKAGES)


def test_the_scheduler_overrides_what_xdist_calls() -> None:
    """A release of xdist that renamed these would quietly go back to its own scopes."""
    base = SuiteScheduling.__mro__[1]
    assert callable(getattr(base, "_split_scope", None)) and callable(getattr(base, "_assign_work_unit", None))


@pytest.mark.timeout(180)
def test_two_workers_keep_each_unit_together_and_the_stacks_first(tmp_path: Path) -> None:
    files = {
        "tests/diagnostics/test_a.py": 3,
        "tests/diagnostics/test_b.py": 3,
        "tests/npusmi/test_c.py": 4,
        "tests/npusmi/test_d.py": 4,
        "tests/web/test_e.py": 4,
        **dict.fromkeys(STACK_FILES, 2),
    }
    for name, count in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("\n".join(RECORDING_TEST.format(n=n) for n in range(count)))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUN_LOG": str(tmp_path / "run.log")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope", "tests"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [line.split(" ", 1) for line in (tmp_path / "run.log").read_text().splitlines()]
    assert len(runs) == sum(files.values())
    workers: dict[str, set[str]] = {}
    for worker, nodeid in runs:
        workers.setdefault(unit_of(nodeid), set()).add(worker)
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers
    (stacks_worker,) = workers[STACKS]
    on_it = [unit_of(nodeid) for worker, nodeid in runs if worker == stacks_worker]
    assert on_it[: 2 * len(STACK_FILES)] == [STACKS] * (2 * len(STACK_FILES)), on_it
