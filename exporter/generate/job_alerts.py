"""The PromQL the training-job alerts share: the lifecycle gate every one of them passes (no
job alert for a finished job), the rank's device joined to each, and the straggler comparison
across the ranks of one job."""

from __future__ import annotations

from exporter.generate.common import JOB, indent
from exporter.thresholds.table import num

# npu_job_state{state}: running, finished (the hook closed), stalled (silent without closing).
RUNNING = 'npu_job_state{state="running"} == 1'
FINISHED = 'npu_job_state{state="finished"} == 1'
STALLED = 'npu_job_state{state="stalled"} == 1'


def not_finished(expr: str, lookback: str) -> str:
    """``expr`` (per rank) unless the rank finished within ``lookback`` and does not run again.
    The finished state is served only ingest.finished_ttl, but a rate over the job's last
    samples keeps a value for its whole range after the series end: ``lookback`` is the
    longest range a job alert rates over."""
    return (
        f"(\n{indent(expr)}\n)\nunless on ({JOB})\n(\n"
        f'  max_over_time(npu_job_state{{state="finished"}}[{lookback}]) == 1\n'
        f"  unless on ({JOB}) {RUNNING}\n)"
    )


def on_device(expr: str) -> str:
    """``expr`` (per rank) with the `device` of the rank's npu_job_info on the same exporter (two
    nodes may run the same job_name and rank); unchanged without one (a profile-only job)."""
    return (
        f"(\n{indent(expr)}\n)\n* on ({JOB}) group_left (device)\n  topk by ({JOB}) (1, npu_job_info)\nor on ({JOB})\n(\n{indent(expr)}\n)"
    )


def stalled(threshold: float) -> str:
    """Seconds since the rank's latest iteration: past ``threshold`` while it still reports
    (hung), or at once when its hook went silent without closing (crashed, npu_job_state stalled)."""
    since = "time() - npu_job_last_iteration_timestamp_seconds"
    return f"{since} > {num(threshold)}\nor on ({JOB})\n(\n  ({since})\n  and on ({JOB}) {STALLED}\n)"


def busy_per_iteration(range_: str) -> str:
    """Mean seconds per iteration a rank spends outside communication: in synchronous data
    parallel every rank steps at one rate and the others wait for the slowest in their
    collectives, so the straggler is the rank with the most time outside communication. A rank
    that reports no communication phase counts its whole iteration."""
    total = f"rate(npu_job_iteration_duration_seconds_sum[{range_}])"
    comm = f'sum without (phase, stage) (rate(npu_job_phase_seconds_total{{stage="communication"}}[{range_}]))'
    return f"(\n  {total}\n  - ({comm} or 0 * {total})\n)\n/ rate(npu_job_iteration_duration_seconds_count[{range_}])"


def straggler(range_: str, threshold: float, min_ranks: int) -> str:
    """A rank whose busy time per iteration exceeds the median of its job's ranks (on every
    instance: a job spans nodes) by more than ``threshold``; value: its busy time over that median."""
    busy = busy_per_iteration(range_)
    job = "job, job_name"
    return (
        f"(\n{indent(busy)}\n)\n/ on ({job}) group_left ()\n"
        f"quantile by ({job}) (0.5,\n{indent(busy)}\n)\n> {num(1 + threshold)}\n"
        f"and on ({job})\ncount by ({job}) (npu_job_iterations_total) >= {min_ranks}"
    )
