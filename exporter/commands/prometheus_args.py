"""The Prometheus options `diagnose` and `report` share, declared once: the window
(--prometheus, --range, --end, --selector: :class:`PrometheusWindow`) and the bounds on its
requests (--timeout, --deadline: :class:`RequestBounds`), each read back from the parsed
arguments. What differs between the two commands (defaults, examples, wording, whether the URL
is required) is given by each."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.diagnostics import argtypes
from exporter.diagnostics.httpclient import Deadline
from exporter.diagnostics.model import CannotDiagnose
from exporter.diagnostics.promapi import PrometheusClient, PrometheusError, parse_duration, parse_time


@dataclass(frozen=True)
class PrometheusWindow:
    """One command's window over Prometheus history."""

    range_default: str  # e.g. 1h
    range_help: str  # what --range is, before its default
    end_example: str  # a relative --end, e.g. now-2d
    selector_example: str  # a --selector, e.g. {instance="node-1:9435"}
    required: bool = False  # --prometheus must be given (the command has no other input)
    prefix: str = ""  # before each window help, e.g. "Prometheus: " where other inputs exist

    def add_arguments(self, group: argparse._ActionsContainer, others: Sequence[OtherInput] = ()) -> None:
        """--prometheus (with ``others`` as mutually exclusive inputs beside it), then --range,
        --end and --selector, into ``group``."""
        url = group.add_mutually_exclusive_group() if others else group
        url.add_argument("--prometheus", metavar="URL", required=self.required, help="Prometheus base URL, e.g. http://prometheus:9090")
        for other in others:
            url.add_argument(other.flag, metavar=other.metavar, help=other.help)
        group.add_argument(
            "--range",
            type=argtypes.duration,
            default=parse_duration(self.range_default),
            metavar="DURATION",
            help=f"{self.prefix}{self.range_help} (default: {self.range_default})",
        )
        group.add_argument(
            "--end",
            type=argtypes.timestamp,
            default=None,
            metavar="TIME",
            help=f"{self.prefix}end of the window: now (default), {self.end_example}, unix seconds or RFC 3339",
        )
        group.add_argument(
            "--selector",
            type=argtypes.label_selector,
            default="",
            metavar="'{LABEL=\"VALUE\",...}'",
            help=f"{self.prefix}label matchers added to every query, e.g. '{self.selector_example}'",
        )

    def read(self, args: argparse.Namespace) -> tuple[float, float]:
        """(end, seconds) of the window: --end (default now) and --range."""
        end = args.end if getattr(args, "end", None) is not None else parse_time("now")
        return end, getattr(args, "range", parse_duration(self.range_default))


@dataclass(frozen=True)
class RequestBounds:
    """One command's --timeout and --deadline: the default and the words of their help."""

    timeout_default: str  # e.g. 15s
    timeout_help: str  # what --timeout bounds, before its default
    deadline_help: str

    def add_arguments(self, group: argparse._ActionsContainer) -> None:
        """--timeout and --deadline, into ``group`` (apart from the window: each command's help
        lists them where they were)."""
        timeout_help = f"{self.timeout_help} (default: {self.timeout_default})"
        default = argtypes.short_duration(self.timeout_default)
        group.add_argument("--timeout", type=argtypes.short_duration, default=default, metavar="DURATION", help=timeout_help)
        group.add_argument("--deadline", type=argtypes.duration, default=None, metavar="DURATION", help=self.deadline_help)

    def timeout(self, args: argparse.Namespace) -> float:
        """Each request's bound, --timeout."""
        return float(getattr(args, "timeout", argtypes.short_duration(self.timeout_default)))

    def deadline(self, args: argparse.Namespace) -> Deadline:
        """The command's --deadline, shared by all its requests."""
        return Deadline(getattr(args, "deadline", None))

    def client(self, args: argparse.Namespace) -> PrometheusClient:
        """The client of --prometheus within these bounds; CannotDiagnose for a bad URL."""
        try:
            return PrometheusClient(args.prometheus, timeout=self.timeout(args), deadline=self.deadline(args))
        except PrometheusError as exc:
            raise CannotDiagnose(str(exc)) from None


@dataclass(frozen=True)
class OtherInput:
    """An input that excludes --prometheus, listed with it (flag, metavar, help)."""

    flag: str
    metavar: str
    help: str
