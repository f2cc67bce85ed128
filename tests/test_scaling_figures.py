"""docs/scaling.md's measured series counts are the ones a fresh run gives: every
`python -m exporter once ... | grep -vc '^#'   # N` line of the doc is run (the simulator,
real subprocesses) and must print N. A change that adds or drops series fails here until the
doc says so."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.timeout(180)
FIGURE = re.compile(r"^\.venv/bin/python -m exporter (once .*?) \| grep -vc '\^#'\s+# (\d+)\s*$")


def figures() -> list[tuple[str, int]]:
    text = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    return [(m[1], int(m[2])) for line in text.splitlines() if (m := FIGURE.match(line.strip()))]


def test_the_doc_has_figures_with_and_without_the_network() -> None:
    found = figures()
    assert len(found) >= 6, found
    assert any("--no-hccn.enabled" not in args for args, _ in found)  # network metrics are on by default


@pytest.mark.parametrize(("args", "expected"), figures(), ids=lambda v: str(v))
def test_series_count_matches_a_fresh_run(args: str, expected: int) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "exporter", *shlex.split(args)], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    series = sum(1 for line in run.stdout.splitlines() if not line.startswith("#"))
    assert series == expected, f"docs/scaling.md says {expected} for `{args}`; a fresh run gives {series}"
