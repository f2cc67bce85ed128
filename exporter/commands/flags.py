"""Every settings option as a command-line flag, and Settings from the file, env and flags."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from exporter.app.settings import (
    OPTIONS,
    Settings,
    build_settings,
    check_fault_codes,
    load_ingest_token,
    read_config_file,
)
from exporter.core.options import Option


def add_settings_flags(parser: argparse.ArgumentParser, *, serve: bool = True) -> None:
    """Every option of the settings as a flag, grouped by section (``serve=False``: only
    those `once` uses). A flag left out keeps the environment's, the file's or the default."""
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file (every flag is also a key)")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in OPTIONS:
        if option.serve_only and not serve:
            continue
        section = option.key.split(".")[0] if "." in option.key else "general"
        group = groups.setdefault(section, parser.add_argument_group(section))
        kwargs: dict[str, Any] = {"dest": option.key, "default": None, "help": help_text(option)}
        if option.switch:
            group.add_argument(option.flag_name, action=argparse.BooleanOptionalAction, **kwargs)
        elif option.key == "simulator.scenario":
            group.add_argument(option.flag_name, nargs="?", const="healthy", metavar=option.value_name, **kwargs)
        elif option.repeatable:
            group.add_argument(option.flag_name, action="append", metavar=option.value_name, **kwargs)
        else:
            group.add_argument(option.flag_name, metavar=option.value_name, **kwargs)


def help_text(option: Option) -> str:
    """The option's help with its default and variable, once (argparse adds nothing: default=None)."""
    shown = option.shown_default
    default = f"default: {shown}; " if shown is not None else ""
    live = "a SIGHUP applies it; " if option.live else ""
    # argparse formats help with %-style; a literal % in a help text must be doubled.
    return f"{option.help} ({default}{live}env {option.env_name})".replace("%", "%%")


def load_settings(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Settings from ``--config``, the environment and the flags; ConfigError naming every bad key."""
    file_values: dict[str, Any] = {}
    origin = "config"
    if args.config:
        origin = args.config
        file_values = read_config_file(args.config)
    flags = {option.key: getattr(args, option.key, None) for option in OPTIONS}
    settings = load_ingest_token(build_settings(file_values, env, flags, origin=origin))
    check_fault_codes(settings)
    return settings
