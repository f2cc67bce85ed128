"""External tools the tests run for real (Prometheus, promtool, Alertmanager, Chromium): found on PATH.

scripts/install-test-packages (run by `make test`) installs their Debian packages when it can.
"""

from __future__ import annotations

import os
import shutil

import pytest

HINTS = {
    "prometheus": "Debian package prometheus",
    "promtool": "Debian package prometheus",
    "prometheus-alertmanager": "Debian package prometheus-alertmanager",
    "amtool": "Debian package prometheus-alertmanager",
    "chromium": "Debian package chromium",
    "victoria-metrics": "Debian package victoria-metrics",
}


def tool(name: str, *aliases: str) -> str:
    """A tool from PATH (``name`` or one of ``aliases``); missing, it skips the test locally and
    fails it under CI. The reason names ``name`` only, so every skip for one tool is one group
    in the run's "skipped groups" summary."""
    path = next(filter(None, map(shutil.which, (name, *aliases))), None)
    if not path:
        if os.environ.get("CI"):
            pytest.fail(f"{name} missing under CI: {HINTS.get(name, '')}")
        pytest.skip(f"{name} not installed ({HINTS.get(name, '')})")
    return path
