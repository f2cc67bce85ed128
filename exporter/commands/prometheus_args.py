"""The Prometheus arguments `diagnose` and `report` share (--prometheus, --range, --end,
--selector): declared once, with what differs between the two commands (range default,
examples, whether the URL is required) given by each."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.diagnostics import argtypes
from exporter.diagnostics.promapi import parse_duration


@dataclass(frozen=True)
class PrometheusWindow:
    """One command's window over Prometheus history."""

    range_default: str  # e.g. 1h
    range_help: str  # what --range is, before its default
    end_example: str  # a relative --end, e.g. now-2d
    selector_example: str  # a --selector, e.g. {instance="node-1:9435"}
    required: bool = False  # --prometheus must be given (the command has no other input)
    prefix: str = ""  # before each window help, e.g. "Prometheus: " where other inputs exist


@dataclass(frozen=True)
class OtherInput:
    """An input that excludes --prometheus, listed with it (flag, metavar, help)."""

    flag: str
    metavar: str
    help: str


def add_prometheus_arguments(group: argparse._ActionsContainer, window: PrometheusWindow, others: Sequence[OtherInput] = ()) -> None:
    """--prometheus (with ``others`` as mutually exclusive inputs beside it), then --range, --end
    and --selector, into ``group``."""
    url = group.add_mutually_exclusive_group() if others else group
    url.add_argument("--prometheus", metavar="URL", required=window.required, help="Prometheus base URL, e.g. http://prometheus:9090")
    for other in others:
        url.add_argument(other.flag, metavar=other.metavar, help=other.help)
    group.add_argument(
        "--range",
        type=argtypes.duration,
        default=parse_duration(window.range_default),
        metavar="DURATION",
        help=f"{window.prefix}{window.range_help} (default: {window.range_default})",
    )
    group.add_argument(
        "--end",
        type=argtypes.timestamp,
        default=None,
        metavar="TIME",
        help=f"{window.prefix}end of the window: now (default), {window.end_example}, unix seconds or RFC 3339",
    )
    group.add_argument(
        "--selector",
        type=argtypes.label_selector,
        default="",
        metavar="'{LABEL=\"VALUE\",...}'",
        help=f"{window.prefix}label matchers added to every query, e.g. '{window.selector_example}'",
    )
