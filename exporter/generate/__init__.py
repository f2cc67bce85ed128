"""`cann-exporter generate`: alerting rules, recording rules and Grafana dashboards from the
health-threshold table (exporter/thresholds.yaml, or ``--thresholds FILE``).

Pure generators (:func:`alerts`, :func:`recording_rules`, :func:`dashboards`) return plain
data; :func:`render` serialises them with a "generated, do not edit" header and
:func:`run` writes them under ``--out`` (default: the current directory):

    alerts/cann-exporter.alerts.yml      alerting rules (every contract alert)
    alerts/cann-exporter.rules.yml       recording rules (capacity planning)
    grafana/dashboards/*.json            Grafana 10+ dashboards
    grafana/provisioning/...             datasource and dashboard-provider files

alerts/tests/ (promtool unit tests) is written by hand and left alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "CONTRACT_ALERTS", "GenerateError", "add_arguments", "alerts", "dashboards", "recording_rules", "render", "run",
    "with_windows", "write",
]
# Imported on first use, so that building the CLI parser does not load the Grafana SDK.
_LAZY = {
    "CONTRACT_ALERTS": "rules", "GenerateError": "rules", "alerts": "rules", "recording_rules": "rules",
    "with_windows": "rules", "dashboards": "dashboards", "render": "writer", "write": "writer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"exporter.generate.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'exporter.generate' has no attribute {name!r}")


EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thresholds", metavar="FILE", default=None,
                        help="threshold table (default: the packaged exporter/thresholds.yaml)")
    parser.add_argument("--out", metavar="DIR", default=".",
                        help="directory to write alerts/ and grafana/ into (default: the current directory)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from exporter.generate.rules import GenerateError
    from exporter.generate.writer import render, write
    from exporter.thresholds import ThresholdError, load_thresholds

    out, err = out or sys.stdout, err or sys.stderr
    try:
        table = load_thresholds(getattr(args, "thresholds", None))
        files = render(table)
    except ThresholdError as exc:
        for problem in exc.problems:
            print(f"cann-exporter generate: {problem}", file=err)
        return EXIT_USAGE
    except GenerateError as exc:
        print(f"cann-exporter generate: {exc}", file=err)
        return EXIT_USAGE
    target = Path(getattr(args, "out", None) or ".")
    try:
        written = write(target, files)
    except OSError as exc:
        print(f"cann-exporter generate: cannot write under {target}: {exc.strerror or exc}", file=err)
        return EXIT_FAILURE
    print(f"cann-exporter generate: wrote {len(written)} files under {target}", file=out)
    return EXIT_OK
