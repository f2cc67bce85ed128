"""The one reading of numbers, placeholders and durations that every parser and setting shares.

Tools print numbers in many ways and the exporter must never be fooled or slowed by one:
- a number is ASCII digits with an optional sign, fraction and exponent, at most 30 digits
  per part (``int()`` refuses 4,300+ digits with an error, and plain ``int``/``float`` would
  also take ``1_0``, ``nan``, ``inf`` or non-ASCII digits that no tool prints);
- a placeholder (``-``, ``NA``, ``N/A``, ``None``, ``nan``, blank, in any case) means "no
  reading": it reads as ``None``, never as zero;
- a duration is ``<number><unit>`` repeated (``10s``, ``1.5m``, ``1h30m``, ``500ms``, ``7d``);
  PromQL reads only whole numbers, so windows written into rules are checked with
  ``promql=True``.
"""

from __future__ import annotations

import math
import re
from typing import Any

PLACEHOLDERS = frozenset({"", "-", "--", "na", "n/a", "none", "nan"})

_DIGITS = "[0-9]{1,30}"
_INT_RE = re.compile(f"[+-]?{_DIGITS}", re.ASCII)
NUMBER_PATTERN = f"[+-]?{_DIGITS}(?:\\.{_DIGITS})?(?:[eE][+-]?[0-9]{{1,3}})?"  # for regexes that embed a number
_NUMBER_RE = re.compile(NUMBER_PATTERN, re.ASCII)


def is_placeholder(text: str) -> bool:
    """True for the texts tools print instead of a reading."""
    return text.strip().casefold() in PLACEHOLDERS


def to_int(text: str | None) -> int | None:
    """The whole text as an integer; None for placeholders and anything else."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if _INT_RE.fullmatch(text) else None


def to_float(text: str | None) -> float | None:
    """The whole text as a finite number; None for placeholders and anything else."""
    if text is None:
        return None
    text = text.strip()
    if not _NUMBER_RE.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def leading_float(text: str) -> float | None:
    """The number a text starts with (``47 C``, ``3262.90 mV``); None when it starts with none."""
    match = _NUMBER_RE.match(text.strip())
    if match is None:
        return None
    value = float(match.group(0))
    return value if math.isfinite(value) else None


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` short enough for one message line (a 5,000-digit value says its length)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# --- durations -------------------------------------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_DURATION_PART = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,9})?)\s*(ms|s|m|h|d|w|y)", re.ASCII)


def parse_duration(value: Any, *, promql: bool = False, allow_zero: bool = False) -> float:
    """Seconds of a duration: ``10s``, ``1.5m``, ``1h30m``, ``500ms``, or a number of seconds.

    Must be finite and greater than zero (or zero with ``allow_zero``, for an alert's
    ``for: 0m``). ``promql=True`` accepts only what PromQL reads: whole numbers with a unit on
    every part and no spaces. Raises ValueError with a message naming what was expected.
    """
    example = "10m or 1h30m" if promql else "10s, 1m or 500ms"
    if isinstance(value, bool) or (promql and not isinstance(value, str)):
        raise ValueError(f"expected a duration like {example}, got {shown(value)}")
    if isinstance(value, (int, float)):
        seconds = _seconds_of_number(value)
    elif not promql and (number := to_float(str(value))) is not None:
        seconds = number  # a plain number of seconds, as environment variables often give it
    else:
        text = str(value).strip()
        parts = _DURATION_PART.findall(text)
        rebuilt = "".join(f"{number}{unit}" for number, unit in parts)
        compact = text if promql else "".join(text.split())
        if not parts or rebuilt != compact or (promql and "." in text):
            raise ValueError(f"expected a duration like {example}, got {shown(value)}")
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "greater than zero"
        raise ValueError(f"must be a finite duration {bound}, got {shown(value)}")
    return seconds


def _seconds_of_number(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range (YAML reads 400 nines as one)
        raise ValueError(f"must be a finite duration, got a {len(str(abs(value)))}-digit number") from None


_READABLE = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def format_duration(seconds: float, parts: int = 2) -> str:
    """A duration as people read it, largest unit first, at most ``parts`` units, rounded to
    the smallest of them: ``1m``, ``2h30m``, ``30d``, ``7m30s``, ``1d1h`` (for 1d1h1m1s)."""
    whole = max(0, round(seconds))
    first = next((i for i, (_, size) in enumerate(_READABLE) if whole >= size), len(_READABLE) - 1)
    units = _READABLE[first : first + parts]
    smallest = units[-1][1]
    left = round(whole / smallest) * smallest
    out = []
    for unit, size in _READABLE:
        if size < smallest:
            break
        count, left = divmod(left, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out) or "0s"
