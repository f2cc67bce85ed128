"""`cann-exporter diagnose` and `report` run in-process, their output captured."""

from __future__ import annotations

import argparse
import io
from dataclasses import dataclass

from exporter.commands import diagnose, report


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_diagnose(*argv: str) -> Result:
    parser = argparse.ArgumentParser(prog="cann-exporter diagnose")
    diagnose.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = diagnose.run(parser.parse_args(list(argv)), out=out, err=err)
    return Result(code, out.getvalue(), err.getvalue())


def run_report(*argv: str) -> Result:
    parser = argparse.ArgumentParser(prog="cann-exporter report")
    report.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = report.run(parser.parse_args(list(argv)), out=out, err=err)
    return Result(code, out.getvalue(), err.getvalue())
