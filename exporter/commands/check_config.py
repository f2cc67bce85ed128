"""`cann-exporter check-config FILE`: validate a configuration file (and the web config it names)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exporter.core.errors import EXIT_OK, EXIT_USAGE
from exporter.node.settings import ConfigError, build_settings, load_yaml
from exporter.web.config import WebConfigError
from exporter.web.security import load_web_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE")


def run(args: argparse.Namespace) -> int:
    path = args.file
    try:
        text = Path(path).read_text(encoding="utf-8")
        settings = build_settings(load_yaml(text, path), {}, {}, origin=path)
        if settings.web.config_file is not None:
            load_web_config(settings.web.config_file)  # certificates included
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, WebConfigError) as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: ok")
    return EXIT_OK
