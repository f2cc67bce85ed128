"""The indicators of a profile summary as a table of rows (title, field, metric), each linked
to its threshold-table row; and reading the summaries of an export path. Shared by
`cann-exporter profile` and `diagnose`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from exporter.core.metric import MetricSpec
from exporter.profiles import metrics as m
from exporter.profiles.formats.common import ProfileParseError
from exporter.profiles.indicators import ProfileSummary, summarize
from exporter.profiles.layout import ProfileRef, find_profiles
from exporter.profiles.load import load_profile
from exporter.thresholds.table import Indicator, Thresholds

_OUTPUT_DIRS = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")


@dataclass(frozen=True)
class Row:
    title: str
    field: str
    spec: MetricSpec | None  # links the row to the threshold table via its metric


ROWS = (
    Row("step duration", "step_duration_seconds", m.PROFILE_STEP_DURATION),
    Row("compute share", "compute_ratio", m.PROFILE_COMPUTE),
    Row("communication (not overlapped)", "communication_ratio", m.PROFILE_COMMUNICATION),
    Row("idle (Free)", "idle_ratio", m.PROFILE_IDLE),
    Row("memory copy", "memcpy_ratio", m.PROFILE_MEMCPY),
    Row("framework overhead", "framework_overhead_ratio", m.PROFILE_FRAMEWORK),
    Row("top-3 operators", "top3_operator_ratio", m.PROFILE_TOP3),
    Row("most expensive operator", "max_operator_ratio", m.PROFILE_MAX_OPERATOR),
    Row("communication wait", "communication_wait_ratio", None),
)


def load_summaries(path_text: str, top: int = 5, per_step: bool = False) -> tuple[list[ProfileSummary], list[str], bool]:
    """(summaries, problems, whether any export was found) of a profile export or a directory
    of them (also used by `cann-exporter diagnose --profile-dir`)."""
    path = _profile_root(Path(path_text))
    refs, problems = ([], [f"{path_text}: no such file or directory"]) if not path.exists() else _find(path)
    summaries: list[ProfileSummary] = []
    for ref in refs:
        found, problem = _read(ref, top, per_step)
        summaries += found
        problems += [problem] if problem else []
    return summaries, problems, bool(refs)


def _profile_root(path: Path) -> Path:
    """Accept the output directory (ASCEND_PROFILER_OUTPUT etc.) or a file in it as its export."""
    if path.is_file() and path.parent.name in _OUTPUT_DIRS:
        path = path.parent
    return path.parent if path.name in _OUTPUT_DIRS else path


def _find(path: Path) -> tuple[list[ProfileRef], list[str]]:
    refs, failures = find_profiles(path)
    return refs, [f.message for f in failures]


def _read(ref: ProfileRef, top: int, per_step: bool) -> tuple[list[ProfileSummary], str | None]:
    try:
        data = load_profile(ref.path, ref.producer, ref.job_name)
        return [s for d in data for s in summarize(d, top, per_step)], None
    except ProfileParseError as exc:
        return [], f"{ref.path}: skipped ({exc.reason}): {exc.message}"
    except Exception as exc:  # a parser bug: say so, without a traceback
        return [], f"{ref.path}: skipped (internal error): {exc!r}"


def indicator_for(row: Row, table: Thresholds) -> Indicator | None:
    """The threshold-table row whose metrics include this indicator's metric (None: informational)."""
    found = table.for_metric(row.spec.name) if row.spec else ()
    return found[0] if found else None
