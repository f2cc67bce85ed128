"""`cann-exporter check-config FILE`: validate a configuration file (and the web config it names)."""

from __future__ import annotations

import argparse
import sys

from exporter.core.errors import EXIT_OK, EXIT_USAGE
from exporter.node.collectors import NAMES
from exporter.node.settings import (
    ConfigError,
    Settings,
    build_settings,
    load_ingest_token,
    read_config_file,
)
from exporter.web.config import WebConfigError
from exporter.web.security import load_web_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE")


def run(args: argparse.Namespace) -> int:
    path = args.file
    try:
        settings = load_ingest_token(build_settings(read_config_file(path), {}, {}, origin=path))
        if settings.web.config_file is not None:
            load_web_config(settings.web.config_file)  # certificates included
    except (ConfigError, WebConfigError) as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: ok")
    for line in collectors(settings):
        print(line)
    return EXIT_OK


def collectors(settings: Settings) -> list[str]:
    """One line per collector: on or off, and what else decides whether its source runs."""
    simulator = settings.simulator.scenario
    npu_smi = (f"the simulator ({simulator}, {settings.simulator.model})" if simulator not in (None, "auto")
               else f"npu-smi at {settings.npu_smi.path}" + (", else the simulator" if simulator == "auto" else ""))
    conditions = {
        "devices": npu_smi,
        "processes": npu_smi,
        "network": {None: "where hccn_tool is installed (hccn.enabled auto)", True: "hccn_tool (hccn.enabled true)",
                    False: "nothing runs: hccn.enabled is false"}[settings.hccn.enabled],
        "pods": {None: "inside Kubernetes (podresources.enabled auto)", True: f"kubelet at {settings.podresources.socket}",
                 False: "nothing runs: podresources.enabled is false"}[settings.podresources.enabled],
        "profiles": "; ".join(filter(None, (
            f"{len(settings.profiles.dirs)} profiles.dirs" if settings.profiles.dirs else "",
            "POST /api/v1/profiles" if settings.ingest.enabled and settings.collector.jobs else "",
        ))) or "nothing runs: no profiles.dirs, and no ingest for the hooks' profiles",
        "jobs": "POST /api/v1/steps" if settings.ingest.enabled else "nothing runs: ingest.enabled is false",
        "self": "cann_exporter_*, process_*, python_*",
    }
    return [f"collector.{name}: on, {conditions[name]}" if getattr(settings.collector, name) else f"collector.{name}: off"
            for name in NAMES]
