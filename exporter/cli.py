"""Command line: serve, once, check-config, profile, generate, diagnose, report.

Thin: parse the arguments, hand over to the command (exporter/commands/); `serve` is the
default command when the first argument is an option.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from difflib import get_close_matches
from typing import NoReturn

from exporter import __version__
from exporter.app.settings import ConfigError
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
from exporter.core.options import FAMILIAR_KEYS
from exporter.core.shutdown import EXIT_WITHIN, REQUEST_GRACE, THREAD_GRACE

SERVE_DESCRIPTION = (
    f"Serve /metrics (the default command). SIGTERM or SIGINT stops it within about {EXIT_WITHIN:g} s: "
    f"{REQUEST_GRACE:g} s for requests in flight, then {THREAD_GRACE:g} s for worker threads; one stuck "
    f"in a read is left behind."
)


class Parser(argparse.ArgumentParser):
    """An error is one line and a pointer to --help: serve's whole usage is 50 lines, and the
    mistake scrolled out of sight above it."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists every option)\n")


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations: `--list` must not quietly mean `--listen`, and new flags must not
    # change what an old abbreviation meant.
    parser = Parser(prog="cann-exporter", description="Prometheus exporter for Huawei Ascend NPU nodes.", allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"cann-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=description or help, allow_abbrev=False)

    add_settings_flags(command("serve", "serve /metrics (the default command)", SERVE_DESCRIPTION))
    add_settings_flags(command("once", "collect once and print the exposition text"), serve=False)
    check_config.add_arguments(command("check-config", "validate a configuration file"))
    profile.add_arguments(command("profile", "indicators and verdicts of a torch_npu/msprof profile"))
    generate.add_arguments(command("generate", "write alerts/ and grafana/ from the threshold table"))
    diagnose.add_arguments(command("diagnose", "three-level health report: verdicts, causes, tuning levers"))
    report.add_arguments(command("report", "capacity-planning report (HTML + charts) from Prometheus history"))
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Arguments; a mistyped option shows its command's usage and the closest option."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _subparsers(parser).get(args.command, parser)
        known = {flag: flag for action in command._actions for flag in action.option_strings}
        if "--listen" in known:
            known |= {"--" + theirs.replace("_", "-"): "--" + ours for theirs, ours in FAMILIAR_KEYS.items()}
        hints = [
            f"{word} (did you mean {known[close[0]]}?)" if (close := get_close_matches(word.split("=")[0], list(known), n=1)) else word
            for word in extra
        ]
        command.error(f"unrecognized arguments: {' '.join(hints)}")  # exits 2
    return args


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# Commands that take their own arguments (the others run from Settings).
_TOOLS = {
    "check-config": check_config.run,
    "profile": profile.run,
    "generate": generate.run,
    "diagnose": diagnose.run,
    "report": report.run,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "serve")
    args = parse(build_parser(), argv)
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
    return serve.run(settings, reread=lambda: load_settings(args, os.environ))
