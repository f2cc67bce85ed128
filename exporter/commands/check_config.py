"""`cann-exporter check-config FILE`: validate a configuration file (and the web config it names),
then say what each collector would run on this machine (each registration's own description, as
the landing page and the start-up log give it) and check that the tools it would run exist here.

Exit 0: valid, and this machine can serve it. Exit 2: the configuration is wrong (each problem
named). Exit 3: the configuration is valid but a tool it needs is missing or not executable on
this machine (npu-smi, or hccn_tool with hccn.enabled true): on the node that is a broken
install; on a build or CI machine that validates configs for other hosts, 3 is expected.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from exporter.app.settings import (
    ConfigError,
    build_settings,
    check_fault_codes,
    load_ingest_token,
    read_config_file,
)
from exporter.core.about import CollectorState
from exporter.core.errors import EXIT_OK, EXIT_USAGE
from exporter.core.registration import Tool
from exporter.node.assembly import build_sources
from exporter.web.config import WebConfigError
from exporter.web.security import load_web_config

EXIT_TOOLS_MISSING = 3  # valid configuration, but this machine lacks a tool it runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE")


def run(args: argparse.Namespace) -> int:
    path = args.file
    try:
        settings = load_ingest_token(build_settings(read_config_file(path), {}, {}, origin=path))
        check_fault_codes(settings)
        web = load_web_config(settings.web.config_file) if settings.web.config_file is not None else None  # certificates included
    except (ConfigError, WebConfigError) as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: ok")
    for warning in web.config.warnings if web is not None else ():
        print(f"warning: {warning}", file=sys.stderr)
    built = build_sources(settings, say=False)  # what this machine would run: nothing is started
    for line in collectors(built.collectors):
        print(line)
    missing = missing_tools(built.tools)
    for problem in missing:
        print(problem, file=sys.stderr)
    return EXIT_TOOLS_MISSING if missing else EXIT_OK


def missing_tools(tools: tuple[Tool, ...]) -> list[str]:
    """A line per tool the configuration runs that is not an executable file here."""
    problems = []
    for tool in tools:
        problem = tool_problem(tool.path)
        if problem:
            problems.append(f"{tool.key}: {problem}" + (f"; {tool.hint}" if tool.hint else ""))
    return problems


def tool_problem(tool: str) -> str | None:
    """Why ``tool`` (a name looked up on PATH, or a path) cannot be run here, or None."""
    if os.sep not in tool:
        return None if shutil.which(tool) else f"{tool} is not on PATH ({os.environ.get('PATH', '')})"
    if not os.path.exists(tool):
        return f"{tool} does not exist"
    if not os.path.isfile(tool) or not os.access(tool, os.X_OK):
        return f"{tool} is not an executable file"
    return None


def collectors(states: tuple[CollectorState, ...]) -> list[str]:
    """One line per collector: on, with what runs for it here, or off, and why."""
    return [
        f"collector.{c.name}: {'on' if c.on else 'off'}" + (f", {c.detail}" if c.detail and "is off" not in c.detail else "")
        for c in states
    ]
