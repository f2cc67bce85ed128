"""Alert builders for training jobs (the cann-exporter-training group), from the hooks' counters
and the profile summaries: operator hot spots, memory copies, framework overhead, idle gaps,
stalls, iteration-time regressions and stragglers. Spec + table -> (expr, summary,
description); rules.py puts the groups together and gates each of these with
job_alerts.not_finished and on_device."""

from __future__ import annotations

from exporter.generate.common import JOB, Built, indent, pct, profile_fresh
from exporter.generate.job_alerts import stalled, straggler
from exporter.generate.texts import JOB_SHORT, JOB_TEXT
from exporter.thresholds.table import AlertSpec, Thresholds, num


def job_phase_share(stages: str, range_: str, offset: str = "") -> str:
    """Share of iteration time spent in ``stages`` (regex), from the hooks' counters (whatever word each phase was given)."""
    off = f" offset {offset}" if offset else ""
    return (
        f'sum without (phase, stage) (rate(npu_job_phase_seconds_total{{stage=~"{stages}"}}[{range_}]{off}))\n'
        f"  / rate(npu_job_iteration_duration_seconds_sum[{range_}]{off})"
    )


def mean_iteration(range_: str, offset: str = "") -> str:
    off = f" offset {offset}" if offset else ""
    return f"rate(npu_job_iteration_duration_seconds_sum[{range_}]{off})\n  / rate(npu_job_iteration_duration_seconds_count[{range_}]{off})"


def _hot_operator(spec: AlertSpec, table: Thresholds) -> Built:
    hot = profile_fresh(f"npu_profile_max_operator_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = (
        f"(\n{indent(hot)}\n)\n* on ({JOB}) group_left (op_type)\n"
        f'  (0 * npu_profile_operator_time_ratio{{position="1"}} + 1)\n'
        f"or on ({JOB})\n(\n{indent(hot)}\n)"
    )
    return (
        expr,
        f"One operator type dominates the device time of {JOB_SHORT}",
        (
            f"In the latest profile of {JOB_TEXT}, operator type {{{{ $labels.op_type }}}} takes "
            f"{{{{ $value | humanizePercentage }}}} of device kernel time (above {pct(spec.threshold)})."
        ),
    )


def _top_operators(spec: AlertSpec, table: Thresholds) -> Built:
    expr = profile_fresh(f"npu_profile_top3_operator_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    return (
        expr,
        f"Three operator types dominate the device time of {JOB_SHORT}",
        (
            f"In the latest profile of {JOB_TEXT}, the three most expensive operator types take "
            f"{{{{ $value | humanizePercentage }}}} of device kernel time (healthy: < {pct(spec.threshold)})."
        ),
    )


def _memcpy(spec: AlertSpec, table: Thresholds) -> Built:
    ind = table[spec.indicator] if spec.indicator else None
    hooks = f"(\n{indent(job_phase_share('h2d|d2h', spec.range))}\n) > {num(spec.threshold)}"
    profile = profile_fresh(f"npu_profile_memcpy_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = f"{hooks}\nor on ({JOB})\n(\n{indent(profile)}\n)"
    healthy = f" (healthy: {ind.healthy_text()})" if ind and ind.healthy is not None else ""
    return (
        expr,
        f"Memory copies take a large share of the steps of {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | humanizePercentage }}}} of its step time in "
            f"host-device memory copies (H2D + D2H), above {pct(spec.threshold)}{healthy}."
        ),
    )


def _framework(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    factor = 1 + float(spec.param("increase", 0.5))
    now, before = job_phase_share("framework", spec.range), job_phase_share("framework", spec.range, baseline)
    hooks = f"(\n{indent(now)}\n) > {num(spec.threshold)}\nunless\n(\n{indent(now)}\n)\n<= {num(factor)} * (\n{indent(before)}\n)"
    prof = "npu_profile_framework_overhead_ratio"
    profile = profile_fresh(
        f"{prof} > {num(spec.threshold)}\nunless {prof} <= {num(factor)} * ({prof} offset {baseline})", table.alerting.profile_max_age
    )
    expr = f"(\n{indent(hooks)}\n)\nor on ({JOB})\n(\n{indent(profile)}\n)"
    return (
        expr,
        f"Host-side framework overhead is high for {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | humanizePercentage }}}} of its step time in "
            f"the framework on the host, above {pct(spec.threshold)} and more than {num(factor)}x its share "
            f"{baseline} earlier (or no baseline)."
        ),
    )


def _idle_gaps(spec: AlertSpec, table: Thresholds) -> Built:
    # Only ranks that were already iterating one range ago: while a series is younger than
    # the range, rate() underestimates it and a job that just started would look idle.
    hooks = (
        f"1 - rate(npu_job_iteration_duration_seconds_sum[{spec.range}]) > {num(spec.threshold)}\n"
        f"and rate(npu_job_iterations_total[{spec.range}]) > 0\n"
        f"and on ({JOB}) npu_job_iterations_total offset {spec.range}"
    )
    profile = profile_fresh(f"npu_profile_idle_ratio > {num(spec.threshold)}", table.alerting.profile_max_age)
    expr = f"(\n{indent(hooks)}\n)\nor on ({JOB})\n(\n{indent(profile)}\n)"
    return (
        expr,
        f"The device idles between the steps of {JOB_SHORT}",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} leaves the device idle {{{{ $value | humanizePercentage }}}} of "
            f"the time (between iterations, or Free time in its latest profile), above {pct(spec.threshold)}."
        ),
    )


def _stalled(spec: AlertSpec, table: Thresholds) -> Built:
    assert spec.threshold is not None
    return (
        stalled(spec.threshold),
        f"Training {JOB_SHORT} has stalled",
        (
            f"{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} has not finished an iteration for {{{{ $value | humanizeDuration }}}} "
            f"while it still reports through the hooks (threshold {num(spec.threshold)}s), or its hook went silent "
            f"without closing (the process crashed or was killed)."
        ),
    )


def _straggler(spec: AlertSpec, table: Thresholds) -> Built:
    assert spec.threshold is not None and spec.range is not None
    return (
        straggler(spec.range, spec.threshold, int(spec.param("min_ranks", 2))),
        f"Straggler: {JOB_SHORT} holds its job back",
        (
            f'{JOB_TEXT[0].upper()}{JOB_TEXT[1:]} spends {{{{ $value | printf "%.2f" }}}}x the median time per '
            f"iteration of its job's ranks outside communication over {spec.range} (threshold "
            f"{num(1 + spec.threshold)}x): the other ranks wait for it in their collectives."
        ),
    )


def _regression(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    expr = (
        f"(\n{indent(mean_iteration(spec.range))}\n)\n/\n(\n{indent(mean_iteration(spec.range, baseline))}\n)\n- 1 > {num(spec.threshold)}"
    )
    return (
        expr,
        f"Iterations of {JOB_SHORT} are slower than {baseline} ago",
        (
            f"The mean iteration time of {JOB_TEXT} over {spec.range} is {{{{ $value | humanizePercentage }}}} "
            f"above the same job's {baseline} earlier (threshold {pct(spec.threshold)})."
        ),
    )


BUILDERS = {
    "NPUHotOperator": _hot_operator,
    "NPUTopOperatorsDominant": _top_operators,
    "NPUMemcpyHigh": _memcpy,
    "NPUFrameworkOverheadHigh": _framework,
    "NPUIdleGapsHigh": _idle_gaps,
    "NPUTrainingStalled": _stalled,
    "NPUIterationTimeRegression": _regression,
    "NPUJobStragglerRank": _straggler,
}
NO_THRESHOLD: set[str] = set()
NEEDS_RANGE = {"NPUMemcpyHigh", "NPUFrameworkOverheadHigh", "NPUIdleGapsHigh", "NPUIterationTimeRegression", "NPUJobStragglerRank"}
GROUP = ("cann-exporter-training", tuple(BUILDERS))
