"""What a fresh machine is told about the tests it cannot run: scripts/install-test-packages before
the run (with stand-ins for dpkg, id, apt-get and sudo; nothing is installed) and the "skipped
groups" summary after it (a pytest run of its own on a tiny test directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "install-test-packages"
PACKAGES = ("prometheus", "prometheus-alertmanager", "chromium", "victoria-metrics")
INSTALLED = "#!/bin/sh\necho 'Status: install ok installed'\n"


# --- the summary --------------------------------------------------------------------------------
def pytest_run(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("CI", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={directory}", "."]
    return subprocess.run(argv, cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False)


def write_project(directory: Path, files: dict[str, str]) -> Path:
    files = {
        "pytest.ini": "[pytest]\n",
        "conftest.py": (
            "from tests.support.skips import write_skip_summary\n\n"
            "def pytest_terminal_summary(terminalreporter):\n"
            "    write_skip_summary(terminalreporter)\n"
        ),
        **files,
    }
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_summary_names_each_reason_once_with_its_count_and_files(tmp_path: Path) -> None:
    proc = pytest_run(
        write_project(
            tmp_path,
            {
                # skipped from a helper: the file named is the test's, not the helper's
                "need.py": "import pytest\n\ndef tool_a():\n    pytest.skip('a not installed (package a)')\n",
                "test_one.py": "from need import tool_a\n\ndef test_1():\n    tool_a()\n\n"
                "def test_2():\n    tool_a()\n\ndef test_runs():\n    pass\n",
                "test_two.py": "import pytest\n\n@pytest.mark.skipif(True, reason='a not installed (package a)')\ndef test_3():\n    pass\n\n"
                "def test_4():\n    pytest.skip('b is not installed')\n",
            },
        )
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.split(" skipped groups ")[1].splitlines()[1:]
    assert summary[:4] == [
        "3 skipped: a not installed (package a)",
        "    in test_one.py, test_two.py",
        "1 skipped: b is not installed",
        "    in test_two.py",
    ], proc.stdout


def test_no_summary_when_nothing_is_skipped(tmp_path: Path) -> None:
    proc = pytest_run(write_project(tmp_path, {"test_ok.py": "def test_ok():\n    pass\n"}))
    assert proc.returncode == 0 and "skipped groups" not in proc.stdout, proc.stdout + proc.stderr


# --- the install script ---------------------------------------------------------------------------
def run_script(bin_dir: Path, stand_ins: dict[str, str], ci: bool = False) -> subprocess.CompletedProcess[str]:
    """The script with PATH = ``bin_dir`` only: the stand-ins are all the system it sees."""
    bin_dir.mkdir(exist_ok=True)
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), **({"CI": "true"} if ci else {})}
    argv = [shutil.which("bash") or "/bin/bash", str(SCRIPT)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)


def recorder(log: Path, code: int = 0) -> str:
    """A stand-in that appends its argv to ``log`` and exits with ``code``."""
    return f'#!/bin/sh\necho "$*" >> {log}\nexit {code}\n'


ROOT_ID = "#!/bin/sh\necho 0\n"
NOT_ROOT = {"id": "#!/bin/sh\necho 1000\n", "dpkg": "#!/bin/sh\nexit 1\n"}


def test_script_is_executable_bash() -> None:
    assert os.access(SCRIPT, os.X_OK) and SCRIPT.read_text().startswith("#!/usr/bin/env bash\n")


@pytest.mark.parametrize(
    "stand_ins",
    [
        {"dpkg": INSTALLED},
        {name: "#!/bin/sh\n" for name in ("prometheus", "promtool", "prometheus-alertmanager", "amtool", "chromium", "victoria-metrics")},
    ],
    ids=["dpkg", "on-path"],
)
def test_everything_present_is_silent(tmp_path: Path, stand_ins: dict[str, str]) -> None:
    log = tmp_path / "calls"
    proc = run_script(tmp_path / "bin", {**stand_ins, "apt-get": recorder(log), "sudo": recorder(log), "id": ROOT_ID})
    assert (proc.returncode, proc.stdout, proc.stderr, log.exists()) == (0, "", "", False)


@pytest.mark.parametrize("sudo", [None, "#!/bin/sh\nexit 1\n"], ids=["no-sudo", "sudo-needs-password"])
def test_missing_without_root_says_what_is_skipped_and_runs_on(tmp_path: Path, sudo: str | None) -> None:
    log = tmp_path / "calls"
    proc = run_script(tmp_path / "bin", {**NOT_ROOT, "apt-get": recorder(log), **({"sudo": sudo} if sudo else {})})
    assert (proc.returncode, proc.stdout, log.exists()) == (0, "", False), proc.stderr
    assert "missing Debian packages: prometheus prometheus-alertmanager chromium victoria-metrics" in proc.stderr
    assert ("sudo is not installed" if sudo is None else "sudo needs a password") in proc.stderr
    assert "apt-get install -y --no-install-recommends prometheus prometheus-alertmanager chromium victoria-metrics" in proc.stderr
    groups = (
        "tests/generate/test_e2e_prometheus.py",
        "tests/deploy/test_deploy_compose.py",
        "tests/diagnostics/test_report.py",
        "tests/deploy/test_deploy_victoriametrics.py",
    )
    assert all(group in proc.stderr for group in groups), proc.stderr


def test_missing_without_apt_get_says_why(tmp_path: Path) -> None:
    proc = run_script(tmp_path / "bin", {"id": ROOT_ID})
    assert proc.returncode == 0 and "apt-get not found" in proc.stderr, proc.stderr
    assert "put prometheus, promtool, alertmanager, amtool, chromium and victoria-metrics on PATH" in proc.stderr


def test_missing_under_ci_fails(tmp_path: Path) -> None:
    proc = run_script(tmp_path / "bin", NOT_ROOT, ci=True)
    assert proc.returncode != 0 and "missing Debian packages" in proc.stderr and "CI is set" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("uid", "prefix"), [("0", ""), ("1000", "-n env DEBIAN_FRONTEND=noninteractive apt-get ")])
def test_installs_only_the_missing_ones_quietly(tmp_path: Path, uid: str, prefix: str) -> None:
    """As root apt-get runs directly; otherwise through passwordless sudo (its stand-in records the call)."""
    log = tmp_path / "calls"
    dpkg = "#!/bin/sh\n[ \"$2\" = prometheus ] && echo 'Status: install ok installed'\nexit 0\n"
    stand_ins = {"id": f"#!/bin/sh\necho {uid}\n", "dpkg": dpkg, "apt-get": recorder(log), "sudo": recorder(log)}
    proc = run_script(tmp_path / "bin", stand_ins)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    password_check = ["-n true"] if prefix else []
    assert log.read_text().splitlines() == [
        *password_check,
        f"{prefix}update -qq",
        f"{prefix}install -y -qq --no-install-recommends prometheus-alertmanager chromium victoria-metrics",
    ]


def test_failed_install_shows_apt_get_and_fails(tmp_path: Path) -> None:
    apt_get = "#!/bin/sh\n[ \"$1\" = update ] && exit 0\necho 'E: Unable to locate package chromium'\nexit 100\n"
    proc = run_script(tmp_path / "bin", {"id": ROOT_ID, "dpkg": "#!/bin/sh\nexit 1\n", "apt-get": apt_get})
    assert proc.returncode != 0 and "E: Unable to locate package" in proc.stderr, proc.stderr
