"""What the profile source remembers across restarts: parsed summaries, as JSON."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from exporter.core.health import Failure
from exporter.core.inputfile import InputRefused, MiB, read_text_input
from exporter.profiles.formats.common import ProfileParseError
from exporter.profiles.indicators import OperatorShare, ProfileSummary

# --- (de)serialisation for the state file and --json ------------------------------------------


def summary_to_dict(summary: ProfileSummary) -> dict[str, Any]:
    data = asdict(summary)
    data["steps"] = list(summary.steps)
    data["memcpy_kind_ratios"] = dict(summary.memcpy_kind_ratios)
    data["issues"] = list(summary.issues)
    return data


def summary_from_dict(data: Mapping[str, Any]) -> ProfileSummary:
    """Inverse of summary_to_dict; raises ProfileParseError on anything unexpected."""
    try:
        known = {f.name for f in fields(ProfileSummary)}
        values = {k: v for k, v in data.items() if k in known}
        values["steps"] = tuple(int(s) for s in values.get("steps", ()))
        values["memcpy_kind_ratios"] = tuple((str(k), float(v)) for k, v in dict(values.get("memcpy_kind_ratios", {})).items())
        values["top_operators"] = tuple(OperatorShare(**o) for o in values.get("top_operators", ()))
        values["issues"] = tuple(str(i) for i in values.get("issues", ()))
        return ProfileSummary(**values)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ProfileParseError("malformed", f"bad stored summary: {exc}") from None


def fresh_copy(summary: ProfileSummary) -> ProfileSummary:
    """``summary`` rebuilt of new objects. A summary made while its export's parse data was held
    sits among it in the allocator's arenas; kept after the data is freed, its few objects would
    keep those arenas (tens of MiB after a large export) from going back to the system. Copied
    once the data is gone, and the original dropped, they do not."""
    return summary_from_dict(json.loads(json.dumps(summary_to_dict(summary))))


STATE_VERSION = 1
# A full state (max_exports summaries of a few KiB, a path and fingerprint for each of the other
# exports remembered, at most 4 x max_exports) is far below this; anything larger is not a file we wrote.
MAX_STATE_BYTES = 64 * MiB


@dataclass(frozen=True)
class Entry:
    fingerprint: str
    summaries: tuple[ProfileSummary, ...] = ()
    error: str | None = None
    newest_mtime: float = 0.0  # of its listing when parsed: which exports are oldest


@dataclass
class State:
    """Every export remembered, and the newest mtime of those forgotten (older exports found
    again are not parsed: see ProfileSource._forget_oldest)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    forgotten_before: float = 0.0


def read_state_file(path: Path) -> tuple[State, list[Failure]]:
    """What a previous run parsed; an unreadable state file is reported and then replaced."""
    if not os.path.lexists(path):
        return State(), []
    try:
        return parse_state(read_text_input(path, MAX_STATE_BYTES)), []
    except (InputRefused, ValueError, ProfileParseError, RecursionError) as exc:
        return State(), [Failure(str(path), "state_file", f"{path}: ignoring unreadable state file: {exc}")]


def write_state_file(path: Path, text: str) -> list[Failure]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # atomic: a crash never leaves half a state file
    except OSError as exc:
        return [Failure(str(path), "state_file", f"{path}: cannot write state: {exc.strerror or exc}")]
    return []


def render_state(state: State) -> str:
    profiles = {
        path: {
            "fingerprint": e.fingerprint,
            "error": e.error,
            "newest_mtime": e.newest_mtime,
            "summaries": [summary_to_dict(s) for s in e.summaries],
        }
        for path, e in sorted(state.entries.items())
    }
    return (
        json.dumps({"version": STATE_VERSION, "profiles": profiles, "forgotten_before": state.forgotten_before}, indent=1, sort_keys=True)
        + "\n"
    )


def parse_state(text: str) -> State:
    """Raises ValueError (or ProfileParseError) on anything but a state file we wrote."""
    data: Any = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not isinstance(data.get("profiles"), dict):
        raise ValueError(f"not a version {STATE_VERSION} profile state file")
    entries = {}
    for path, item in data["profiles"].items():
        if not isinstance(item, dict) or not isinstance(item.get("fingerprint"), str):
            raise ValueError(f"bad entry for {path}")
        error = item.get("error")
        entries[str(path)] = Entry(
            item["fingerprint"],
            tuple(summary_from_dict(s) for s in item.get("summaries") or ()),
            error if isinstance(error, str) else None,
            _time(item.get("newest_mtime")),
        )
    return State(entries, _time(data.get("forgotten_before")))


def _time(value: Any) -> float:
    """A stored time; absent (a file from before it was kept) or not a finite number: 0, the oldest."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        number = float(value)
    except OverflowError:
        return 0.0
    return number if math.isfinite(number) else 0.0
