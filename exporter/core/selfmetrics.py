"""The exporter's own metrics: build, simulator, per-source health and withheld chips."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from exporter import __version__
from exporter.core.health import SourceStatus
from exporter.core.metric import family, spec
from exporter.core.registration import Simulated
from exporter.core.snapshot import PartKey

BUILD_INFO = spec(
    "cann_exporter_build_info", "gauge", "Exporter build; value 1.", ("version", "python_version"), field=("version", "python_version")
)
SIMULATED = spec(
    "cann_exporter_simulated", "gauge", "1 when the data comes from the built-in simulator.", ("scenario", "model"), field="simulated"
)
SOURCE_SUCCESS = spec(
    "cann_exporter_source_success",
    "gauge",
    "1 if every subject of the source's latest run succeeded (0 also when only some failed: see cann_exporter_source_failed_subjects).",
    ("source",),
    field="success",
)
SOURCE_DURATION = spec(
    "cann_exporter_source_duration_seconds", "gauge", "Duration of the source's latest run, seconds.", ("source",), field="duration_seconds"
)
SOURCE_ERRORS = spec("cann_exporter_source_errors_total", "counter", "Source failures by reason.", ("source", "reason"), field="errors")
SOURCE_LAST_SUCCESS = spec(
    "cann_exporter_source_last_success_timestamp_seconds",
    "gauge",
    "Unix time of the source's latest successful run.",
    ("source",),
    field="last_success_timestamp",
)
SOURCE_RUNS = spec("cann_exporter_source_runs_total", "counter", "Runs of the source.", ("source",), field="runs")
SOURCE_SUBJECTS = spec(
    "cann_exporter_source_subjects",
    "gauge",
    "Subjects the source's latest run tried: one per command and card (npu-smi `-t usages -i 3`), chip, port or file.",
    ("source",),
    field="subjects",
)
SOURCE_FAILED_SUBJECTS = spec(
    "cann_exporter_source_failed_subjects",
    "gauge",
    "Subjects that failed in the source's latest run; above 0 and below cann_exporter_source_subjects, the rest of the source is fresh.",
    ("source",),
    field="failing",
)
MAX_FAILING_SUBJECTS = 16  # per source: subjects are per card x command, bounded, but not small on a 16-card node
SOURCE_SUBJECT_FAILING = spec(
    "cann_exporter_source_subject_failing",
    "gauge",
    f"1 for each subject failing in the source's latest run, with its reason "
    f"(absent once it succeeds); at most {MAX_FAILING_SUBJECTS} per source, in subject order.",
    ("source", "subject", "reason"),
    field="failing",
)
STALE_CHIPS = spec("cann_exporter_stale_chips", "gauge", "Chips whose data is older than max age and is not served.", field="stale_chips")
PENDING_CHIPS = spec(
    "cann_exporter_pending_chips",
    "gauge",
    "Chips npu-smi lists that are not served yet: their device id (npu-smi info -m) is not known, for at most npu_smi.device_wait.",
    field="pending_chips",
)

SOURCE_NOTE = f"""\
## Sources: whole and partial failures

A source is one scheduled task (`npu_smi_info`, `npu_smi_details`, `npu_smi_hardware`,
`npu_smi_hccs_bw`, `npu_smi_inventory`, `hccn_*`, `podresources`, `profiles`). Each run tries
*subjects*: for `npu_smi_details` one `-t KIND -i NPU` call per card and detail kind
(`usages -i 3`), plus `health -i N -c C` per unwell chip; for `npu_smi_hardware` and
`npu_smi_hccs_bw` one `-t KIND -i N -c C` call per chip and kind (`volt -i 0 -c 1`), except
the kinds the card answered it does not support (asked once, not a failure); for
`npu_smi_info` the one `info` call.

- `cann_exporter_source_success` is 1 only when every subject of the latest run succeeded.
  When one card fails `-t usages` with -8005, it is 0 although the other cards' values are fresh.
- `cann_exporter_source_subjects` and `cann_exporter_source_failed_subjects` say how much failed:
  0 < failed < subjects is a partial failure (only the failing subjects' metrics are stale or
  missing); failed = subjects is a whole one.
- `cann_exporter_source_subject_failing{{source, subject, reason}}` is 1 for each failing
  subject, absent once it succeeds again: at most {MAX_FAILING_SUBJECTS} per source (in subject
  order; the count above is exact), so a 16-card node failing everything adds 16 series, not 64.
- CANNExporterSourceFailing lists the failing subjects and says whether the rest is fresh.
- A run still going after three of its intervals (at least 60 s), a worker stuck in a read,
  counts as a failure with reason `overdue`: success turns 0 and the last-success time stops
  while it lasts; no second run of that source starts meanwhile.
- `profiles` counts every refused file or directory by reason on its export (`not_regular`,
  `outside_root`, `too_large`, `line_too_long`, `permission_denied`, ...; past the caps on what
  a file may keep: `item_too_large`, `too_deep`, `too_many_objects`, `too_many_events`,
  `cell_too_long`, `too_many_columns`) and a scan stopped at
  `profiles.max_entries` once per scan on its directory (`too_many_entries`); see
  docs/formats/profiler-exports.md, "What a watched directory can cost".
"""

SELF_METRICS = (
    BUILD_INFO,
    SIMULATED,
    SOURCE_SUCCESS,
    SOURCE_DURATION,
    SOURCE_ERRORS,
    SOURCE_LAST_SUCCESS,
    SOURCE_RUNS,
    SOURCE_SUBJECTS,
    SOURCE_FAILED_SUBJECTS,
    SOURCE_SUBJECT_FAILING,
    STALE_CHIPS,
    PENDING_CHIPS,
)


@dataclass(frozen=True)
class StatusPart:
    """The exporter itself at one moment."""

    sources: tuple[SourceStatus, ...] = ()
    simulated: Simulated | None = None  # when running on the simulator
    stale_chips: int = 0  # chips withheld because their data is too old
    pending_chips: int = 0  # chips withheld until their device id is known
    version: str = __version__
    python_version: str = platform.python_version()


class StatusCollector:
    specs = SELF_METRICS

    def render(self, part: StatusPart) -> Iterator[Metric]:
        build = family(BUILD_INFO)
        build.add_metric([part.version, part.python_version], 1)
        yield build
        if part.simulated is not None:
            simulated = family(SIMULATED)
            simulated.add_metric(list(part.simulated), 1)
            yield simulated

        success, duration, errors = family(SOURCE_SUCCESS), family(SOURCE_DURATION), family(SOURCE_ERRORS)
        last, runs = family(SOURCE_LAST_SUCCESS), family(SOURCE_RUNS)
        subjects, failed, failing = family(SOURCE_SUBJECTS), family(SOURCE_FAILED_SUBJECTS), family(SOURCE_SUBJECT_FAILING)
        for source in part.sources:
            success.add_metric([source.name], 1 if source.success else 0)
            runs.add_metric([source.name], source.runs)
            if source.duration_seconds is not None:
                duration.add_metric([source.name], source.duration_seconds)
            if source.last_success_timestamp is not None:
                last.add_metric([source.name], source.last_success_timestamp)
            for reason, count in sorted(source.errors.items()):
                errors.add_metric([source.name, reason], count)
            if source.runs:
                subjects.add_metric([source.name], source.subjects)
                failed.add_metric([source.name], len(source.failing))
            for subject, reason in sorted(source.failing.items())[:MAX_FAILING_SUBJECTS]:
                failing.add_metric([source.name, subject, reason], 1)
        yield from (success, duration, errors, last, runs, subjects, failed, failing)

        for withheld_spec, count in ((STALE_CHIPS, part.stale_chips), (PENDING_CHIPS, part.pending_chips)):
            withheld = family(withheld_spec)
            withheld.add_metric([], count)
            yield withheld


STATUS = PartKey("status", StatusPart)  # its snapshot key
