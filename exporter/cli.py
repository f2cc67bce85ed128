"""Command line: serve, once, check-config, profile, generate, diagnose, report.

Thin: parse the arguments, hand over to the command (exporter/commands/); `serve` is the
default command when the first argument is an option.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from exporter import __version__
from exporter.commands import (
    check_config,
    diagnose,
    generate,
    once,
    profile,
    report,
    serve,
)
from exporter.commands.flags import add_settings_flags, load_settings
from exporter.core.errors import EXIT_USAGE
from exporter.node.settings import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cann-exporter", description="Prometheus exporter for Huawei Ascend NPU nodes.")
    parser.add_argument("--version", action="version", version=f"cann-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_settings_flags(commands.add_parser("serve", help="serve /metrics (the default command)"))
    add_settings_flags(commands.add_parser("once", help="collect once and print the exposition text"))
    check_config.add_arguments(commands.add_parser("check-config", help="validate a configuration file"))
    profile.add_arguments(commands.add_parser("profile", help="indicators and verdicts of a torch_npu/msprof profile"))
    generate.add_arguments(commands.add_parser("generate", help="write alerts/ and grafana/ from the threshold table"))
    diagnose.add_arguments(commands.add_parser("diagnose", help="three-level health report: verdicts, causes, tuning levers"))
    report.add_arguments(commands.add_parser("report", help="capacity-planning report (HTML + charts) from Prometheus history"))
    return parser


# Commands that take their own arguments (the others run from Settings).
_TOOLS = {"check-config": check_config.run, "profile": profile.run, "generate": generate.run,
          "diagnose": diagnose.run, "report": report.run}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "serve")
    args = build_parser().parse_args(argv)
    if args.command in _TOOLS:
        return _TOOLS[args.command](args)
    try:
        settings = load_settings(args, os.environ)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"cann-exporter: configuration error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    from exporter.core.logs import setup_logging

    setup_logging(settings.log.format, settings.log.level)
    if args.command == "once":
        return once.run(settings)
    return serve.run(settings)
