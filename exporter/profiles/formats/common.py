"""What every profiler-export reader shares: its error, partial-failure issues, size limits,
and reading cells and files (docs/formats/profiler-exports.md, "Reading the files")."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, TextIO

from exporter.core.errors import ReasonError
from exporter.core.inputfile import (
    InputRefused,
    MiB,
    open_input,
    read_input,
)
from exporter.core.values import is_placeholder, to_float, to_int

# --- errors, issues, limits ------------------------------------------------------------------


class ProfileParseError(ReasonError):
    """A file (or a whole profile) could not be used.

    ``reason`` is a short label-safe kind for self-metrics: ``unreadable``, ``empty``,
    ``missing_columns``, ``truncated``, ``malformed``, ``bad_value``, ``too_large``,
    ``no_data``, ``unsupported``, the JSON caps (``item_too_large``, ``too_deep``,
    ``too_many_objects``, ``too_many_events``), ``cell_too_long``, ``too_many_columns``, the
    export's budgets (``memory_budget``, ``cpu_budget``: formats/budget.py), and the refusals of exporter.core.inputfile
    (``not_regular``, ``outside_root``, ``line_too_long``, ``permission_denied``, ``not_found``).
    ``issues`` are the file problems behind a ``no_data``: each is counted too.
    """

    def __init__(self, reason: str, message: str, issues: tuple[Issue, ...] = ()) -> None:
        super().__init__(reason, message)
        self.issues = issues


@dataclass(frozen=True)
class Issue:
    """Something that made part of a profile unusable; the rest was still used."""

    reason: str
    message: str


@dataclass(frozen=True)
class Limits:
    """Caps that keep one bad or giant export from stalling the exporter or taking its memory,
    and the directory its files must stay in.

    Every file is opened through exporter.core.inputfile: regular files only (a FIFO or a
    device is refused without blocking), no larger than the cap of its kind, and, with
    ``root`` set, only where its real location stays under ``root`` unless ``allow_outside``
    (:attr:`confined_to`).
    """

    max_csv_bytes: int = 2 << 30  # streamed (~150 MB/s): bounds the time spent (a 5 M-kernel capture is ~1.5 GB)
    max_csv_line: int = 1 * MiB  # one CSV line held at a time: memory stays this, whatever the file
    max_trace_bytes: int = 1 << 30  # trace_view.json / msprof_*.json, streamed
    max_json_bytes: int = 64 << 20  # communication.json, streamed
    max_info_bytes: int = 1 * MiB  # profiler_info*.json, profiler_metadata.json: a few KiB when real
    # One JSON item (a trace event, a communication op, a small file whole): real ones are a few
    # hundred bytes to a few KiB, dozens of values, 3-5 levels deep. Past a cap the file is refused.
    max_json_event_bytes: int = 1 * MiB  # item_too_large
    max_json_event_values: int = 100_000  # item_too_large (objects, arrays and scalars)
    max_json_depth: int = 64  # too_deep
    max_json_values: int = 5_000_000  # too_many_objects: values in communication.json (~50 per op)
    max_trace_events: int = 10_000_000  # too_many_events: a 1 GiB trace holds ~5 M
    max_trace_processes: int = 4_096  # pids whose names or Overlap Analysis sums are kept (real: dozens)
    max_host_steps: int = 100_000  # ProfilerStep spans kept (real: a few hundred)
    max_memcpy_events: int = 2_000_000  # compact device events of torch.profiler traces (~20 bytes each)
    max_memcpy_tasks: int = 200_000  # MEMCPY_ASYNC tasks kept as records (~300 bytes each): real captures hold thousands
    # What one export may cost as a whole (formats/budget.py): bytes of names and records held
    # (real exports hold a few MiB) and work units of parsing (100-160 ns each on one core: at most
    # about 25 s of a core; a real 60 MB trace costs 10 M units, a 35 MB kernel table 1.5 M).
    max_export_memory: int = 32 * MiB  # memory_budget: the file over it is not used
    max_export_work: int = 150_000_000  # cpu_budget: the export is not used
    root: str | None = None  # the watched directory the export was found in
    allow_outside: bool = False  # profiles.allow_outside: follow symlinks out of root

    @property
    def confined_to(self) -> str | None:
        """The directory the export's files must resolve into: None when they may lead out."""
        return None if self.allow_outside else self.root


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


def refused(exc: InputRefused, path: Path) -> ProfileParseError:
    """An inputfile refusal as this package's error, keeping its reason."""
    return ProfileParseError(exc.reason, exc.message.replace(os.fspath(path), path.name, 1))


def open_file(path: Path, max_bytes: int, limits: Limits) -> BinaryIO:
    """``path`` opened through exporter.core.inputfile with the export's root; refusals raise."""
    try:
        return open_input(path, max_bytes, root=limits.confined_to)
    except InputRefused as exc:
        raise refused(exc, path) from None


def open_text(path: Path, max_bytes: int, limits: Limits) -> TextIO:
    """Text mode for the csv module: newline='' keeps CRLF handling to csv."""
    return io.TextIOWrapper(open_file(path, max_bytes, limits), encoding="utf-8-sig", errors="replace", newline="")


def read_small(path: Path, max_bytes: int, limits: Limits) -> str:
    """A small file whole, decoded leniently (profilers write UTF-8; a stray byte costs a char)."""
    try:
        data = read_input(path, max_bytes, root=limits.confined_to)
    except InputRefused as exc:
        raise refused(exc, path) from None
    return data.decode("utf-8-sig", errors="replace")


def frozen_map(values: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(values))


def json_object(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (wrong shapes read as absent)."""
    return value if isinstance(value, dict) else {}
