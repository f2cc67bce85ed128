"""`cann-exporter generate [--thresholds FILE] [--out DIR]`: alerts/ and grafana/ from the table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from exporter.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thresholds", metavar="FILE", default=None,
                        help="threshold table (default: the packaged exporter/generate/thresholds.yaml)")
    parser.add_argument("--out", metavar="DIR", default=".",
                        help="directory to write alerts/ and grafana/ into (default: the current directory)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # Imported here: building the CLI parser must not load the Grafana SDK.
    from exporter.generate.common import GenerateError
    from exporter.generate.thresholds import ThresholdError, load_thresholds
    from exporter.generate.writer import render, write

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
