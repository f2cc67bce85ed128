"""External tools the tests run for real (Prometheus, promtool, Chromium): found on PATH."""

from __future__ import annotations

import os
import shutil

import pytest

HINTS = {
    "prometheus": "Debian package prometheus",
    "promtool": "Debian package prometheus",
    "chromium": "Debian package chromium (apt-get install -y chromium)",
}


def tool(name: str) -> str:
    """A tool from PATH; missing, it skips the test locally and fails it under CI."""
    path = shutil.which(name)
    if not path:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing under CI: {HINTS.get(name, '')}")
        pytest.skip(f"{name} not installed ({HINTS.get(name, '')})")
    return path
