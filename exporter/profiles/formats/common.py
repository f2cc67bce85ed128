"""What every profiler-export reader shares: its error, partial-failure issues, size limits,
and reading cells and files (docs/formats/profiler-exports.md, "Reading the files")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TextIO

from exporter.core.errors import ReasonError
from exporter.core.values import is_placeholder, to_float, to_int

# --- errors, issues, limits ------------------------------------------------------------------


class ProfileParseError(ReasonError):
    """A file (or a whole profile) could not be used.

    ``reason`` is a short label-safe kind for self-metrics: ``unreadable``, ``empty``,
    ``missing_columns``, ``truncated``, ``malformed``, ``bad_value``, ``too_large``,
    ``no_data``, ``unsupported``.
    """


@dataclass(frozen=True)
class Issue:
    """Something that made part of a profile unusable; the rest was still used."""

    reason: str
    message: str


@dataclass(frozen=True)
class Limits:
    """Caps that keep one bad or giant export from stalling the exporter."""

    max_csv_bytes: int = 8 << 30        # streamed (~150 MB/s), so this only bounds the time spent
    max_trace_bytes: int = 1 << 30      # trace_view.json / msprof_*.json, streamed (~90 MB/s)
    max_json_bytes: int = 64 << 20      # small JSON files loaded whole (communication, info)
    max_json_event_bytes: int = 16 << 20
    max_memcpy_events: int = 2_000_000


US = 1e-6  # seconds per microsecond

# --- cells ---------------------------------------------------------------------------------------


def is_na(text: str) -> bool:
    """N/A, blank and the other placeholders the profilers write instead of a value."""
    return is_placeholder(text)


def cell_float(text: str | None) -> float | None:
    """A number from a cell; trailing TABs/spaces allowed, N/A is None (docs/formats/profiler-exports.md,
    "Trailing TABs and N/A")."""
    return to_float(text)


def as_int(value: object) -> int | None:
    """An integer from a cell or a JSON value; a float is one only when it is whole."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if not isinstance(value, str):
        return None
    number = to_int(value)
    if number is None and (real := to_float(value)) is not None and real.is_integer():
        number = int(real)
    return number


# --- files ---------------------------------------------------------------------------------------


def check_size(path: Path, limit: int) -> int:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None
    if size > limit:
        raise ProfileParseError(
            "too_large", f"{path.name}: {size / (1 << 20):.0f} MiB is over the {limit / (1 << 20):.0f} MiB limit; skipped"
        )
    return size


def open_text(path: Path) -> TextIO:
    """Text mode for the csv module: newline='' keeps CRLF handling to csv."""
    try:
        return open(path, encoding="utf-8-sig", errors="replace", newline="")
    except OSError as exc:
        raise ProfileParseError("unreadable", f"{path.name}: cannot read: {exc.strerror or exc}") from None


def read_csv(path: Path, reader: Callable[[Iterable[str], str], Any], limits: Limits) -> Any:
    check_size(path, limits.max_csv_bytes)
    with open_text(path) as handle:
        try:
            return reader(handle, path.name)
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None
        except UnicodeError as exc:  # errors='replace' makes this unlikely; belt and braces
            raise ProfileParseError("malformed", f"{path.name}: {exc}") from None


def frozen_map(values: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(values))


def json_object(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (wrong shapes read as absent)."""
    return value if isinstance(value, dict) else {}


