"""`profiles.*`: which directories hold profiler exports and how they are scanned."""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.core.options import (
    option,
    optional_text,
    parse_bool,
    parse_duration,
    parse_positive_int,
    path_list,
)
from exporter.core.registration import Section
from exporter.profiles.formats.common import Limits
from exporter.profiles.layout import MAX_DEPTH, MAX_ENTRIES

# Exports remembered (held, dropped or failed) per export held: beyond max_exports times this
# the oldest not held are forgotten, so what the source remembers never grows with what was created.
REMEMBERED_PER_EXPORT = 4


@dataclass(frozen=True)
class ProfilesOptions:
    dirs: tuple[str, ...] = option(
        (),
        path_list,
        "directories where torch_npu/msprof/MindSpore profiles land (repeatable)",
        flag="--profile-dir",
        metavar="DIR",
        repeatable=True,
    )
    state_file: str | None = option(
        None,
        optional_text,
        "remembers which profiles were parsed across restarts",
        flag="--profile-state-file",
        metavar="PATH",
        default_text="in memory only",
    )
    interval: float = option("30s", parse_duration, "how often the profile directories are scanned", metavar="DURATION", serve_only=True)
    settle: float = option("30s", parse_duration, "an export without a finished marker must be untouched this long", metavar="DURATION")
    top_k: int = option(5, parse_positive_int, "operator types reported per profile", metavar="N")
    allow_outside: bool = option(
        False,
        parse_bool,
        "follow symlinks that lead out of a profile directory (off: such files and directories are refused, reason outside_root)",
    )
    max_exports: int = option(
        256, parse_positive_int, "exports held (parsed and served); beyond it the oldest are dropped and counted", metavar="N"
    )
    max_jobs: int = option(
        32, parse_positive_int, "job names held; beyond it the exports of the oldest jobs are dropped and counted", metavar="N"
    )
    max_entries: int = option(
        MAX_ENTRIES,
        parse_positive_int,
        "directory entries one scan examines per profile directory; beyond it the scan stops there (reason too_many_entries)",
        metavar="N",
    )
    # Bounds, not options: what one scan may cost.
    max_depth: int = MAX_DEPTH  # directory levels searched below each root
    max_parses_per_run: int = 4  # a backlog is worked off over several runs
    limits: Limits = field(default_factory=Limits)

    @property
    def max_remembered(self) -> int:
        """Exports remembered at most (their fingerprints, and the scan before's candidates)."""
        return REMEMBERED_PER_EXPORT * self.max_exports


PROFILES_OPTIONS = Section("profiles", ProfilesOptions)
