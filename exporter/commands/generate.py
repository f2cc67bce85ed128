"""`cann-exporter generate [--thresholds FILE] [--runbook-url BASE] [--exporter-selector MATCHERS] [--out DIR]`:
alerts/ and grafana/ from the table. BASE is where docs/runbooks.md is published; each alert links
BASE#<its name>. MATCHERS narrow the targets CANNExporterDown watches (default: any job)."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import TextIO

from exporter.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--thresholds", metavar="FILE", default=None, help="threshold table (default: the packaged exporter/thresholds/thresholds.yaml)"
    )
    parser.add_argument(
        "--runbook-url",
        metavar="BASE",
        type=runbook_base,
        default=None,
        help="where docs/runbooks.md is published, e.g. https://git.example.com/ops/cann-exporter/"
        "blob/main/docs/runbooks.md; each alert's runbook_url is BASE#<alert name in lower case> "
        "(default or empty: the table's alerting.runbook_url, repository-relative docs/runbooks.md)",
    )
    parser.add_argument(
        "--exporter-selector",
        metavar="MATCHERS",
        type=exporter_selector,
        default=None,
        help="PromQL label matchers (without braces) narrowing the targets CANNExporterDown watches, "
        'e.g. job="npu" (default: the table\'s alerting.exporter_selector, empty: every target '
        "that served cann_exporter_build_info, whatever its job name)",
    )
    parser.add_argument(
        "--out", metavar="DIR", default=".", help="directory to write alerts/ and grafana/ into (default: the current directory)"
    )


def runbook_base(text: str) -> str:
    """An absolute http(s) URL without a fragment (the alert's anchor is appended); empty: the
    table's own (so a deployment can pass an unset variable)."""
    base = text.strip()
    if base and not re.fullmatch(r"https?://[^\s#]+", base):
        raise argparse.ArgumentTypeError(
            f"expected an http(s) URL of the published runbooks without #, e.g. "
            f"https://git.example.com/ops/cann-exporter/blob/main/docs/runbooks.md, got {text!r}"
        )
    return base


def exporter_selector(text: str) -> str:
    from exporter.thresholds.table import selector_problem

    problem = selector_problem(text.strip())
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # Imported here: building the CLI parser must not load the Grafana SDK.
    from exporter.generate.writer import render, write
    from exporter.thresholds.table import GenerateError, ThresholdError, load_thresholds

    out, err = out or sys.stdout, err or sys.stderr
    try:
        table = load_thresholds(getattr(args, "thresholds", None))
        base = getattr(args, "runbook_url", None)
        if base:
            table = dataclasses.replace(table, alerting=dataclasses.replace(table.alerting, runbook_url=base))
        selector = getattr(args, "exporter_selector", None)
        if selector is not None:
            table = dataclasses.replace(table, alerting=dataclasses.replace(table.alerting, exporter_selector=selector))
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
