"""`cann-exporter check-config FILE`: validate a configuration file (and the web config it names),
then check that the tools it would run exist here.

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
    Settings,
    build_settings,
    check_fault_codes,
    load_ingest_token,
    read_config_file,
)
from exporter.core.errors import EXIT_OK, EXIT_USAGE
from exporter.node.collectors import NAMES
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
    for line in collectors(settings):
        print(line)
    missing = missing_tools(settings)
    for problem in missing:
        print(problem, file=sys.stderr)
    return EXIT_TOOLS_MISSING if missing else EXIT_OK


def missing_tools(settings: Settings) -> list[str]:
    """A line per tool the configuration runs that is not an executable file here."""
    needed: list[tuple[str, str]] = []
    if (settings.collector.devices or settings.collector.processes) and settings.simulator.scenario in (None, "auto"):
        needed.append(("npu_smi.path", settings.npu_smi.path))
    if settings.collector.network and settings.hccn.enabled:
        needed.append(("hccn.path", settings.hccn.path))
    problems = []
    for key, tool in needed:
        problem = tool_problem(tool)
        if problem:
            auto = key == "npu_smi.path" and settings.simulator.scenario == "auto"
            problems.append(f"{key}: {problem}" + ("; --simulate auto would serve the simulator" if auto else ""))
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


def collectors(settings: Settings) -> list[str]:
    """One line per collector: on or off, and what else decides whether its source runs."""
    simulator = settings.simulator.scenario
    npu_smi = (
        f"the simulator ({simulator}, {settings.simulator.model})"
        if simulator not in (None, "auto")
        else f"npu-smi at {settings.npu_smi.path}" + (", else the simulator" if simulator == "auto" else "")
    )
    conditions = {
        "devices": npu_smi,
        "processes": npu_smi,
        "network": {
            None: "where hccn_tool is installed (hccn.enabled auto)",
            True: "hccn_tool (hccn.enabled true)",
            False: "nothing runs: hccn.enabled is false",
        }[settings.hccn.enabled],
        "pods": {
            None: "inside Kubernetes (podresources.enabled auto)",
            True: f"kubelet at {settings.podresources.socket}",
            False: "nothing runs: podresources.enabled is false",
        }[settings.podresources.enabled],
        "profiles": "; ".join(
            filter(
                None,
                (
                    f"{len(settings.profiles.dirs)} profiles.dirs" if settings.profiles.dirs else "",
                    "POST /api/v1/profiles" if settings.ingest.enabled and settings.collector.jobs else "",
                ),
            )
        )
        or "nothing runs: no profiles.dirs, and no ingest for the hooks' profiles",
        "jobs": "POST /api/v1/steps" if settings.ingest.enabled else "nothing runs: ingest.enabled is false",
        "self": "cann_exporter_*, process_*, python_*",
    }
    return [
        f"collector.{name}: on, {conditions[name]}" if getattr(settings.collector, name) else f"collector.{name}: off" for name in NAMES
    ]
