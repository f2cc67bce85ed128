"""The profile metrics: name, type, help, labels and the ProfileSummary field that fills each.

One set per (job_name, rank): the latest finished profile wins. Operator shares are over
total device kernel time (communication excluded); step shares over the step's end-to-end
time (Computing + Communication(Not Overlapped) + Free).
"""

from __future__ import annotations

from exporter.core.metric import MetricSpec, spec

PROFILE_LABELS = ("job_name", "rank")


def _profile(name: str, help: str, *extra: str, field: str) -> MetricSpec:
    return spec(name, "gauge", help, PROFILE_LABELS + extra, field=field)


PROFILE_STEP_DURATION = _profile(
    "npu_profile_step_duration_seconds",
    "Mean device step time (Computing + Communication(Not Overlapped) + Free) in the latest profile, seconds.",
    field="step_duration_seconds",
)
PROFILE_COMPUTE = _profile(
    "npu_profile_compute_ratio", "Share of the step the NPU spent computing (Computing / step), 0..1.", field="compute_ratio"
)
PROFILE_COMMUNICATION = _profile(
    "npu_profile_communication_ratio", "Share of the step in communication not overlapped by computing, 0..1.", field="communication_ratio"
)
PROFILE_IDLE = _profile(
    "npu_profile_idle_ratio", "Share of the step the NPU was idle (Free; includes memory copies), 0..1.", field="idle_ratio"
)
PROFILE_MEMCPY = _profile(
    "npu_profile_memcpy_ratio", "Share of the step spent in memory copies (MEMCPY_ASYNC tasks), 0..1.", field="memcpy_ratio"
)
PROFILE_MEMCPY_KIND = _profile(
    "npu_profile_memcpy_kind_ratio",
    "Memory-copy share of the step by kind (h2d, d2h, d2d, h2d_d2h = PCIe direction not recorded, other), 0..1.",
    "kind",
    field="memcpy_kind_ratios",
)
PROFILE_FRAMEWORK = _profile(
    "npu_profile_framework_overhead_ratio",
    "Host-side share of the step before device work starts (Preparing / host step), 0..1.",
    field="framework_overhead_ratio",
)
PROFILE_TOP3 = _profile(
    "npu_profile_top3_operator_ratio",
    "Share of device kernel time taken by the 3 most expensive operator types (communication excluded), 0..1.",
    field="top3_operator_ratio",
)
PROFILE_MAX_OPERATOR = _profile(
    "npu_profile_max_operator_ratio",
    "Share of device kernel time taken by the most expensive operator type (communication excluded), 0..1.",
    field="max_operator_ratio",
)
PROFILE_OPERATOR = _profile(
    "npu_profile_operator_time_ratio",
    "Share of device kernel time of the top-k operator types, by rank position 1..k, 0..1.",
    "op_type",
    "position",
    field="top_operators",
)
PROFILE_LAST_UPDATE = _profile(
    "npu_profile_last_update_timestamp_seconds", "Unix time the latest profile of this job and rank was produced.", field="finished_at"
)

# The source's own count, served with its metrics (like the ingest's cann_exporter_ingest_*).
PROFILES_DROPPED = spec(
    "cann_exporter_profiles_dropped_total",
    "counter",
    "Profiler exports dropped to keep the profile series bounded, by reason (max_exports: more exports than "
    "profiles.max_exports; max_jobs: more job names than profiles.max_jobs); the oldest go first.",
    ("reason",),
    field="dropped",
)

PROFILE_METRICS = (
    PROFILE_STEP_DURATION,
    PROFILE_COMPUTE,
    PROFILE_COMMUNICATION,
    PROFILE_IDLE,
    PROFILE_MEMCPY,
    PROFILE_MEMCPY_KIND,
    PROFILE_FRAMEWORK,
    PROFILE_TOP3,
    PROFILE_MAX_OPERATOR,
    PROFILE_OPERATOR,
    PROFILE_LAST_UPDATE,
    PROFILES_DROPPED,
)
# Plain per-rank gauges, in the order they are rendered.
PROFILE_GAUGES = (
    PROFILE_STEP_DURATION,
    PROFILE_COMPUTE,
    PROFILE_COMMUNICATION,
    PROFILE_IDLE,
    PROFILE_MEMCPY,
    PROFILE_FRAMEWORK,
    PROFILE_TOP3,
    PROFILE_MAX_OPERATOR,
    PROFILE_LAST_UPDATE,
)
