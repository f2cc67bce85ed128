"""Training-job metrics (hooks ingest) and the ingest's own: name, type, help, labels and the
JobsPart field that fills each."""

from __future__ import annotations

import math

from exporter.core.metric import MetricSpec, spec
from exporter.jobs.goodput import KINDS
from exporter.jobs.phases import PHASE_SERIES_PER_RANK

JOB_LABELS = ("job_name", "rank")
# Iteration time spans a millisecond (small models) to minutes (huge pipelines), and a loop's
# steps spread only a few percent around its median. Fixed buckets fine enough for
# histogram_quantile to stay within 10% there would cost ~130 series a rank, so the bounds
# come from one grid of 8 per octave (x1.09, 0.49 ms to 512 s) and each rank serves a window
# of 5 octaves of it, chosen from the median of its first WARMUP_STEPS steps: from the octave
# below the median's to 8x above (docs/training-hooks.md, "Quantile accuracy"). Windows start
# on whole octaves, so ranks of one job, which step alike, share their bounds and sum by le.
BUCKETS_PER_OCTAVE = 8
_LOW_OCTAVE, _HIGH_OCTAVE = -11, 9  # 2**-11 s = 0.49 ms .. 2**9 s = 512 s
WINDOW_OCTAVES = 5
WINDOW_BOUNDS = WINDOW_OCTAVES * BUCKETS_PER_OCTAVE
WARMUP_STEPS = 8  # steps folded before a rank's window is fixed (or fewer, when it closes first)
# 4 significant digits keep the `le` labels short; still strictly increasing.
DURATION_GRID = tuple(float(f"{2 ** (k / BUCKETS_PER_OCTAVE):.4g}") for k in range(_LOW_OCTAVE * 8, _HIGH_OCTAVE * 8 + 1))


def window_start(median: float) -> int:
    """Index in DURATION_GRID of the first bound of the window for steps around ``median`` s."""
    octave = math.floor(math.log2(median)) - 1 if median > 0 else _LOW_OCTAVE
    octave = min(max(octave, _LOW_OCTAVE), _HIGH_OCTAVE - WINDOW_OCTAVES)
    return (octave - _LOW_OCTAVE) * BUCKETS_PER_OCTAVE


# npu_job_state{state}: 1 for the current one, 0 for the others (as kube-state-metrics serves
# pod phases). finished: the hook closed; stalled: silent past ingest.stalled_after.
JOB_STATES = ("running", "finished", "stalled")


def _job(name: str, kind: str, help: str, *extra: str, field: str | tuple[str, ...]) -> MetricSpec:
    return spec(name, kind, help, JOB_LABELS + extra, field=field)


# Per (job_name, rank): RankView fields (npu_job_info: those of its Process).
JOB_INFO = _job(
    "npu_job_info",
    "gauge",
    "Training process reporting through the hooks; value 1. `device` is the chip logic id (joins npu_device_info).",
    "device",
    "world_size",
    "framework",
    "pid",
    field=("device", "world_size", "framework", "pid"),
)
JOB_STATE = _job(
    "npu_job_state",
    "gauge",
    "Lifecycle of the training process: 1 for its current state, 0 for the others. finished: it closed "
    "(close(), end of training, interpreter exit); stalled: no report, not even a heartbeat, for ingest.stalled_after "
    "without closing (crashed or hung).",
    "state",
    field="state",
)
JOB_ITERATION_DURATION = _job(
    "npu_job_iteration_duration_seconds",
    "histogram",
    "Iteration (training step) duration, seconds. Buckets: a window of 5 octaves, 8 per octave, around the rank's "
    "median step (fixed after its first 8 steps; before, +Inf only).",
    field=("window", "cumulative_buckets", "duration_sum"),
)
JOB_ITERATIONS = _job("npu_job_iterations_total", "counter", "Iterations (training steps) completed.", field="iterations")
JOB_SAMPLES = _job("npu_job_samples_total", "counter", "Samples processed, as reported with each step.", field="samples")
JOB_PHASE_SECONDS = _job(
    "npu_job_phase_seconds_total",
    "counter",
    "Exclusive (self) time spent in each phase of the iterations, seconds. `phase` is the name the loop gave (folded onto "
    "the documented vocabulary; other names are served as other), `stage` the step stage it belongs to.",
    "phase",
    "stage",
    field="phase_seconds",
)
JOB_LAST_ITERATION = _job(
    "npu_job_last_iteration_timestamp_seconds",
    "gauge",
    "Unix time the latest iteration ended (stall detection).",
    field="last_iteration_end",
)
JOB_MEMORY_ALLOCATED = _job(
    "npu_job_memory_allocated_bytes",
    "gauge",
    "Device memory held by the framework's allocator (torch memory_allocated), bytes.",
    field="memory_allocated_bytes",
)
JOB_MEMORY_MAX_ALLOCATED = _job(
    "npu_job_memory_max_allocated_bytes",
    "gauge",
    "Peak of npu_job_memory_allocated_bytes since the process started (torch max_memory_allocated), bytes.",
    field="memory_max_allocated_bytes",
)
JOB_MFU = _job(
    "npu_job_model_flops_utilization_ratio",
    "gauge",
    "Model FLOPs utilization: model FLOPs of the steps reported in the last minute, over their time, over the peak FLOP/s "
    "of the rank's chip at the job's precision (npu_peak_flops_per_second); absent without declared FLOPs, a device or a peak.",
    field=("window_flops", "window_seconds", "precision", "peaks"),
)
JOB_PROFILING_OVERHEAD = _job(
    "npu_job_profiling_overhead_seconds_total",
    "counter",
    "Time the training thread spent starting, marking and stopping the hooks' profiling windows, seconds (outside the steps).",
    field="profiling_seconds",
)

JOB_GOODPUT = _job(
    "npu_job_goodput_seconds_total",
    "counter",
    "Time in steps that moved training forward, seconds: steps less their data and checkpoint phases, less steps re-done "
    "after a restart (docs/training-hooks.md, Goodput and badput); goes on across the rank's process restarts.",
    field="goodput",
)
JOB_BADPUT = _job(
    "npu_job_badput_seconds_total",
    "counter",
    "Time of the rank that did not move training forward, seconds, by kind: startup (process start to its first step or "
    "phase), data_wait (data phases), checkpoint_save, checkpoint_restore, lost_progress (steps re-done after a restart), "
    "downtime (no process between a death and the next start), idle (gaps no phase explains), other (phases between steps "
    "that are neither). With npu_job_goodput_seconds_total it adds up to the rank's wall time.",
    "kind",
    field="badput",
)
JOB_DISRUPTIONS = _job(
    "npu_job_disruptions_total",
    "counter",
    "Restarts of the rank: a new process after one that died (no final report).",
    field="disruptions",
)

JOB_METRICS = (
    JOB_INFO,
    JOB_STATE,
    JOB_ITERATION_DURATION,
    JOB_ITERATIONS,
    JOB_SAMPLES,
    JOB_PHASE_SECONDS,
    JOB_LAST_ITERATION,
    JOB_MEMORY_ALLOCATED,
    JOB_MEMORY_MAX_ALLOCATED,
    JOB_MFU,
    JOB_PROFILING_OVERHEAD,
    JOB_GOODPUT,
    JOB_BADPUT,
    JOB_DISRUPTIONS,
)
# Plain per-rank series, in the order they are rendered.
JOB_FIELDS = (
    JOB_ITERATIONS,
    JOB_SAMPLES,
    JOB_LAST_ITERATION,
    JOB_MEMORY_ALLOCATED,
    JOB_MEMORY_MAX_ALLOCATED,
    JOB_PROFILING_OVERHEAD,
    JOB_GOODPUT,
    JOB_DISRUPTIONS,
)


def _series_per_rank(spec: MetricSpec) -> int:
    """The most series one (job_name, rank) has in ``spec``'s family: a histogram has a bucket
    per bound, +Inf, _sum and _count; `phase` takes the stage names and a capped number of other words."""
    if spec.kind == "histogram":
        return WINDOW_BOUNDS + 3
    if "state" in spec.labels:
        return len(JOB_STATES)
    if "kind" in spec.labels:
        return len(KINDS)
    return PHASE_SERIES_PER_RANK if "phase" in spec.labels else 1


# What the ingest reserves per admitted rank (81: info, 3 states, 43 histogram, 17 phases, 5 plain, MFU, profiling
# overhead, goodput, 8 badput kinds, disruptions).
SERIES_PER_RANK = sum(_series_per_rank(spec) for spec in JOB_METRICS)


def _count(name: str, help: str, *, field: str) -> MetricSpec:
    """A counter of the ingest itself: an IngestCounters field."""
    return spec(name, "counter", help, field=field)


def _by_reason(name: str, help: str, *, field: str) -> MetricSpec:
    """A counter of the ingest by reason: an IngestCounters field of (reason, count) pairs."""
    return spec(name, "counter", help, ("reason",), field=field)


# The ingest itself: IngestCounters fields.
# The limits admission enforces (429): the reason of a refusal, and of an eviction it made room with.
ADMISSION_REASONS = ("too_many_jobs", "too_many_ranks", "per_client_limit", "series_budget")
# Refusals of a request body, on either ingest route.
REQUEST_REJECT_REASONS = ("unauthorized", "content_type", "too_large", "malformed_json", "invalid", "out_of_range", "bad_label")
INGEST_REJECT_REASONS = (*REQUEST_REJECT_REASONS, "duplicate_rank", *ADMISSION_REASONS)
INGEST_REQUESTS = _count("cann_exporter_ingest_requests_total", "Batches accepted on POST /api/v1/steps.", field="requests")
INGEST_STEPS = _count("cann_exporter_ingest_steps_total", "Steps accepted on POST /api/v1/steps.", field="steps")
INGEST_REJECTED = _by_reason("cann_exporter_ingest_rejected_total", "Batches rejected on POST /api/v1/steps, by reason.", field="rejected")
INGEST_DROPPED = _count(
    "cann_exporter_ingest_client_dropped_steps_total",
    "Steps the hook clients reported dropping (buffer full, exporter unreachable).",
    field="client_dropped",
)
INGEST_UNKNOWN_PHASES = _count(
    "cann_exporter_ingest_unknown_phases_total",
    "Phase entries of accepted steps whose name is outside the phase vocabulary, served as phase other.",
    field="unknown_phases",
)
INGEST_EXPIRED = _count("cann_exporter_ingest_expired_total", "Job ranks removed after their TTL without reports.", field="expired")
INGEST_EVICTED = _by_reason(
    "cann_exporter_ingest_evicted_total",
    "Job ranks removed to admit a rank that reports steps (only closed ranks, ranks without steps yet and ranks idle for ingest.idle_after give way), by the limit that was full.",
    field="evicted",
)
INGEST_RANKS = spec("cann_exporter_ingest_ranks", "gauge", "Job ranks currently held by the ingest store.", field="held_ranks")
INGEST_INDEX_REGRESSIONS = _count(
    "cann_exporter_ingest_index_regressions_total",
    "Steps whose index was below one their process sent before: accepted, their index ignored (no lost-progress detection for them).",
    field="index_regressions",
)
# How the process holding a rank was known gone when another took the rank over.
TAKEOVER_REASONS = ("finished", "stalled", "pid_gone", "connection_closed")
INGEST_TAKEOVERS = _by_reason(
    "cann_exporter_ingest_takeovers_total",
    "A new process took a job rank over, by how the old one was known gone: finished (final report), stalled (silent for "
    "ingest.stalled_after), pid_gone (its pid gone from this node, start time checked), connection_closed (its connection "
    "closed without a final report and nothing since).",
    field="takeovers",
)

# POST /api/v1/profiles: the summaries of the hooks' profiling windows.
PROFILE_REJECT_REASONS = (*REQUEST_REJECT_REASONS, "too_many_ranks", "per_client_limit")
INGEST_PROFILES = _count("cann_exporter_ingest_profiles_total", "Profile summaries accepted on POST /api/v1/profiles.", field="profiles")
INGEST_PROFILES_REJECTED = _by_reason(
    "cann_exporter_ingest_profiles_rejected_total",
    "Profile summaries rejected on POST /api/v1/profiles, by reason.",
    field="profiles_rejected",
)
INGEST_PROFILE_WINDOWS_SKIPPED = _count(
    "cann_exporter_ingest_profile_windows_skipped_total",
    "Profiling windows the hooks skipped because the previous window's summary was still being made (as the hooks reported).",
    field="profile_windows_skipped",
)
INGEST_PROFILE_JOBS_EVICTED = _count(
    "cann_exporter_ingest_profile_jobs_evicted_total",
    "Jobs whose posted profile summaries were removed to admit a new job past ingest.max_jobs (the job with the oldest latest summary goes).",
    field="profile_jobs_evicted",
)

INGEST_METRICS = (
    INGEST_REQUESTS,
    INGEST_STEPS,
    INGEST_REJECTED,
    INGEST_DROPPED,
    INGEST_UNKNOWN_PHASES,
    INGEST_EXPIRED,
    INGEST_EVICTED,
    INGEST_RANKS,
    INGEST_INDEX_REGRESSIONS,
    INGEST_TAKEOVERS,
    INGEST_PROFILES,
    INGEST_PROFILES_REJECTED,
    INGEST_PROFILE_WINDOWS_SKIPPED,
    INGEST_PROFILE_JOBS_EVICTED,
)
# Plain counts, in the order they are rendered (rejections and evictions come last, by reason).
INGEST_COUNTS = (
    INGEST_REQUESTS,
    INGEST_STEPS,
    INGEST_DROPPED,
    INGEST_UNKNOWN_PHASES,
    INGEST_EXPIRED,
    INGEST_RANKS,
    INGEST_INDEX_REGRESSIONS,
    INGEST_PROFILES,
    INGEST_PROFILE_WINDOWS_SKIPPED,
    INGEST_PROFILE_JOBS_EVICTED,
)
