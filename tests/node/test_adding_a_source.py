"""Adding a source takes what docs/architecture.md ("Adding a source") says, nothing more: a
toy source package (tests/support/toy_source) copied into a copy of `exporter/` as
`exporter/toy/`, and its line in the table. That copy then serves the toy's gauge, switches it
off with the flag its registration declared, describes it in check-config and lists it on the
landing page; its section is a config file's `toy:` mapping."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.serve import Exporter
from tests.support.table import chip_switches

TOY = ROOT / "tests" / "support" / "toy_source"
TABLE_END = ")\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package with the toy source added: the package, and its line in the table."""
    root = tmp_path / "tree"
    shutil.copytree(ROOT / "exporter", root / "exporter", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TOY, root / "exporter" / "toy", ignore=shutil.ignore_patterns("__pycache__"))
    table = root / "exporter" / "node" / "sources.py"
    text = table.read_text()
    assert text.endswith(TABLE_END)  # the table is the module's last statement
    last_import = text.rindex("\nfrom exporter.") + 1
    end_of_imports = text.index("\n", last_import) + 1
    text = text[:end_of_imports] + "from exporter.toy import registration as toy\n" + text[end_of_imports:]
    table.write_text(text[: -len(TABLE_END)] + "    toy.REGISTRATION,\n" + TABLE_END)
    return root


def launcher(tree: Path) -> list[str]:
    """`cann-exporter` from the copy (ahead of the checkout's editable install)."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); from exporter.cli import main; sys.exit(main())"]


def run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*launcher(tree), *args], capture_output=True, text=True, timeout=120, cwd=tree, check=False)


# Nothing else runs: no npu-smi (no collector reads the chips), no hccn_tool, no kubelet.
ALONE = (*(f"--no-collector.{switch}" for switch in chip_switches()), "--log.level", "error")


def test_the_toy_source_is_served_and_switched_off_by_its_flag(tree: Path, tmp_path: Path) -> None:
    reading = tmp_path / "reading"
    reading.write_text("42.5\n")
    served = run(tree, "once", *ALONE, "--toy.path", str(reading))
    assert served.returncode == 0, served.stderr
    assert "# HELP npu_toy_reading The number read from toy.path." in served.stdout
    assert "\nnpu_toy_reading 42.5\n" in served.stdout
    assert 'cann_exporter_source_success{source="toy"} 1.0' in served.stdout
    off = run(tree, "once", *ALONE, "--toy.path", str(reading), "--no-collector.toy")
    assert off.returncode == 0, off.stderr
    assert "npu_toy_reading" not in off.stdout and 'source="toy"' not in off.stdout
    helped = run(tree, "once", "--help")
    assert "--collector.toy" in helped.stdout and "--toy.path" in helped.stdout and "--toy.interval" not in helped.stdout  # serve only


def test_check_config_reads_its_section_and_describes_it(tree: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"simulator:\n  scenario: healthy\ntoy:\n  path: {tmp_path / 'reading'}\n  interval: 2s\n")
    checked = run(tree, "check-config", str(config))
    assert checked.returncode == 0, checked.stderr
    assert f"collector.toy: on, the number in {tmp_path / 'reading'}" in checked.stdout.splitlines()
    config.write_text("toy:\n  pth: /x\n")
    wrong = run(tree, "check-config", str(config))
    assert wrong.returncode == 2 and "unknown key 'toy.pth'; did you mean 'toy.path'?" in wrong.stderr


def test_the_landing_page_lists_it(tree: Path, tmp_path: Path) -> None:
    reading = tmp_path / "reading"
    reading.write_text("7\n")
    exporter = Exporter([*ALONE[:-2], "--toy.path", str(reading), "--toy.interval", "1s"], tmp_path, launcher=launcher(tree))
    try:
        found = exporter.wait_for(lambda samples: any(name == "npu_toy_reading" for name, _ in samples))
        assert found[("npu_toy_reading", frozenset())] == 7
        status, page = exporter.get("/")
        assert status == 200 and f"<td>toy</td><td>on</td><td>the number in {reading}</td>" in page
    finally:
        exporter.stop()
