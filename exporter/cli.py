"""Command line: serve, once, check-config, profile, generate, diagnose, report. Thin: parse, build settings, hand over."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter import __version__, diagnose, generate, profile_report, report
from exporter.config import OPTIONS, ConfigError, Settings, build_settings, load_ingest_token, load_yaml, parse_bool

if TYPE_CHECKING:
    from exporter.webconfig import WebSecurity

log = logging.getLogger("exporter")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    """Every option of the table as a flag; defaults shown come from the same table."""
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in OPTIONS:
        section = option.key.split(".")[0] if "." in option.key else "general"
        group = groups.setdefault(section, parser.add_argument_group(section))
        help_text = f"{option.help} (default: {option.default}; env {option.env_name})"
        kwargs: dict[str, Any] = {"dest": option.key, "default": None, "help": help_text}
        if option.parse is parse_bool:
            group.add_argument(option.flag_name, action=argparse.BooleanOptionalAction, **kwargs)
        elif option.key == "simulator.scenario":
            group.add_argument(option.flag_name, nargs="?", const="healthy", metavar=option.metavar, **kwargs)
        elif option.repeatable:
            group.add_argument(option.flag_name, action="append", metavar=option.metavar, **kwargs)
        else:
            group.add_argument(option.flag_name, metavar=option.metavar, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cann-exporter", description="Prometheus exporter for Huawei Ascend NPU nodes.")
    parser.add_argument("--version", action="version", version=f"cann-exporter {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve /metrics (the default command)")
    _add_source_options(serve)
    once = commands.add_parser("once", help="collect once and print the exposition text")
    _add_source_options(once)
    check = commands.add_parser("check-config", help="validate a configuration file")
    check.add_argument("file", metavar="FILE")
    profile_report.add_arguments(commands.add_parser("profile", help="indicators and verdicts of a torch_npu/msprof profile"))
    generate.add_arguments(commands.add_parser("generate", help="write alerts/ and grafana/ from the threshold table"))
    diagnose.add_arguments(commands.add_parser("diagnose", help="three-level health report: verdicts, causes, tuning levers"))
    report.add_arguments(commands.add_parser("report", help="capacity-planning report (HTML + charts) from Prometheus history"))
    return parser


def load_settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    file_values: dict[str, Any] = {}
    origin = "config"
    if args.config:
        origin = args.config
        try:
            text = Path(args.config).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError([f"{args.config}: cannot read: {exc.strerror}"]) from None
        file_values = load_yaml(text, origin)
    flags = {option.key: getattr(args, option.key, None) for option in OPTIONS}
    return load_ingest_token(build_settings(file_values, env, flags, origin=origin))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "serve")
    args = build_parser().parse_args(argv)
    if args.command == "check-config":
        return _check_config(args.file)
    if args.command == "profile":
        return profile_report.run(args)
    if args.command == "generate":
        return generate.run(args)
    if args.command == "diagnose":
        return diagnose.run(args)
    if args.command == "report":
        return report.run(args)
    try:
        settings = load_settings(args, os.environ)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"cann-exporter: configuration error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    from exporter.logs import setup_logging

    setup_logging(settings.log_format, settings.log_level)
    if args.command == "once":
        return _once(settings)
    return _serve(settings)


def _check_config(path: str) -> int:
    try:
        text = Path(path).read_text(encoding="utf-8")
        settings = build_settings(load_yaml(text, path), {}, {}, origin=path)
        _check_web_config(settings)
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: ok")
    return EXIT_OK


def _check_web_config(settings: Settings) -> None:
    """The web config file named by the settings loads (certificates included), or ConfigError."""
    if settings.web_config_file is None:
        return
    from exporter.webconfig import WebConfigError, load_web_config

    try:
        load_web_config(settings.web_config_file)
    except WebConfigError as exc:
        raise ConfigError(exc.problems) from None


def _web_security(settings: Settings) -> WebSecurity | None:
    """The WebSecurity for --web.config.file, or None; ConfigError when the file is bad."""
    if settings.web_config_file is None:
        return None
    from exporter.webconfig import WebConfigError, WebSecurity

    exempt = frozenset({"/healthz", "/readyz"}) if settings.web_auth_exempt_health else frozenset()
    try:
        return WebSecurity.from_file(settings.web_config_file, exempt_paths=exempt)
    except WebConfigError as exc:
        raise ConfigError(exc.problems) from None


def _once(settings: Settings) -> int:
    from prometheus_client import generate_latest

    from exporter.assembly import assemble

    exporter = assemble(settings, ingest=False)
    snapshot = asyncio.run(exporter.sampler.run_once())
    sys.stdout.write(generate_latest(exporter.registry).decode())
    if not any(chip.up for chip in snapshot.devices.chips):
        print("cann-exporter: no chip could be read", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _serve(settings: Settings) -> int:
    from aiohttp import web

    from exporter.assembly import assemble
    from exporter.server import create_app

    try:
        security = _web_security(settings)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"cann-exporter: configuration error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    exporter = assemble(settings)
    if security is not None:
        exporter.registry.register(security)
    app = create_app(
        exporter.registry, exporter.store, background=[exporter.sampler.run_forever],
        ingest=exporter.ingest, ingest_token=exporter.ingest_token, web_security=security,
    )
    host = settings.listen_host or None
    ssl_context = security.ssl_context if security is not None else None
    log.info("listening", extra={
        "address": f"{settings.listen_host}:{settings.listen_port}", "tls": ssl_context is not None, "version": __version__,
    })
    try:
        web.run_app(app, host=host, port=settings.listen_port, print=None, access_log=None, ssl_context=ssl_context)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            log.error("address already in use; choose another with --listen", extra={"port": settings.listen_port})
        else:
            log.error("cannot listen", extra={"error": str(exc)})
        return EXIT_FAILURE
    return EXIT_OK
