"""argparse value types shared by `diagnose` and `report`: bad values become usage errors
(exit 2 with argparse's message), never tracebacks."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from exporter.diagnostics.promapi import parse_duration, parse_selector, parse_time

T = TypeVar("T")


def _wrap(parse: Callable[[str], T]) -> Callable[[str], T]:
    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


duration = _wrap(parse_duration)  # 30d, 1h30m
timestamp = _wrap(parse_time)  # now, now-2d, unix seconds, RFC 3339
label_selector = _wrap(parse_selector)  # '{instance="a:9435"}'


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {low}..{high}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer {low}..{high}, got {text!r}")
        return value

    return parse


def short_duration(text: str) -> float:
    """Seconds (plain number or a duration such as 500ms, 10s), above 0 and at most 1h."""
    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"expected a duration between 0 and 1h, got {text!r}")
    return seconds
