"""Alert builders for training jobs (the cann-exporter-training group), from the hooks' counters
and the profile summaries: operator hot spots, memory copies, framework overhead, idle gaps,
stalls, iteration-time regressions and stragglers. Spec + table -> (expr, summary,
description); rules.py puts the groups together and gates each of these with
job_alerts.not_finished and on_device."""

from __future__ import annotations

from exporter.generate.common import JOB, Built, healthy_note, indent, pct, profile_fresh
from exporter.generate.goodput_rules import goodput_low
from exporter.generate.job_alerts import stalled, straggler
from exporter.generate.texts import JOB_SHORT, JOB_TEXT, SHARE, upper_first
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


def _fresh(expr: str, table: Thresholds) -> str:
    """``expr`` on a profile gauge, for profiles younger than alerting.profile_max_age."""
    return profile_fresh(expr, table.alerting.profile_max_age)


def _or_profile(hooks: str, profile: str) -> str:
    """The hooks' reading of a rank, or else its latest profile's."""
    return f"{hooks}\nor on ({JOB})\n(\n{indent(profile)}\n)"


def _hot_operator(spec: AlertSpec, table: Thresholds) -> Built:
    hot = _fresh(f"npu_profile_max_operator_ratio > {num(spec.bound)}", table)
    # The hottest operator's type joined from its position-1 row of the operator table.
    with_type = f'(\n{indent(hot)}\n)\n* on ({JOB}) group_left (op_type)\n  (0 * npu_profile_operator_time_ratio{{position="1"}} + 1)'
    return (
        _or_profile(with_type, hot),
        f"One operator type dominates the device time of {JOB_SHORT}",
        f"In the latest profile of {JOB_TEXT}, operator type {{{{ $labels.op_type }}}} takes {SHARE} of device kernel time (above {pct(spec.bound)}).",
    )


def _top_operators(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        _fresh(f"npu_profile_top3_operator_ratio > {num(spec.bound)}", table),
        f"Three operator types dominate the device time of {JOB_SHORT}",
        f"In the latest profile of {JOB_TEXT}, the three most expensive operator types take {SHARE} of device kernel time (healthy: < {pct(spec.bound)}).",
    )


def _memcpy(spec: AlertSpec, table: Thresholds) -> Built:
    hooks = f"(\n{indent(job_phase_share('h2d|d2h', spec.span))}\n) > {num(spec.bound)}"
    return (
        _or_profile(hooks, _fresh(f"npu_profile_memcpy_ratio > {num(spec.bound)}", table)),
        f"Memory copies take a large share of the steps of {JOB_SHORT}",
        f"{upper_first(JOB_TEXT)} spends {SHARE} of its step time in host-device memory copies (H2D + D2H), above {pct(spec.bound)}{healthy_note(spec, table)}.",
    )


def _framework(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    factor = 1 + float(spec.param("increase", 0.5))
    now, before = job_phase_share("framework", spec.span), job_phase_share("framework", spec.span, baseline)
    hooks = f"(\n{indent(now)}\n) > {num(spec.bound)}\nunless\n(\n{indent(now)}\n)\n<= {num(factor)} * (\n{indent(before)}\n)"
    prof = "npu_profile_framework_overhead_ratio"
    profile = _fresh(f"{prof} > {num(spec.bound)}\nunless {prof} <= {num(factor)} * ({prof} offset {baseline})", table)
    return (
        _or_profile(f"(\n{indent(hooks)}\n)", profile),
        f"Host-side framework overhead is high for {JOB_SHORT}",
        f"{upper_first(JOB_TEXT)} spends {SHARE} of its step time in the framework on the host, above {pct(spec.bound)} and more than {num(factor)}x its share {baseline} earlier (or no baseline).",
    )


def _idle_gaps(spec: AlertSpec, table: Thresholds) -> Built:
    # Only ranks that were already iterating one range ago: while a series is younger than
    # the range, rate() underestimates it and a job that just started would look idle.
    hooks = (
        f"1 - rate(npu_job_iteration_duration_seconds_sum[{spec.span}]) > {num(spec.bound)}\n"
        f"and rate(npu_job_iterations_total[{spec.span}]) > 0\n"
        f"and on ({JOB}) npu_job_iterations_total offset {spec.span}"
    )
    return (
        _or_profile(f"(\n{indent(hooks)}\n)", _fresh(f"npu_profile_idle_ratio > {num(spec.bound)}", table)),
        f"The device idles between the steps of {JOB_SHORT}",
        f"{upper_first(JOB_TEXT)} leaves the device idle {SHARE} of the time (between iterations, or Free time in its latest profile), above {pct(spec.bound)}.",
    )


def _stalled(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        stalled(spec.bound),
        f"Training {JOB_SHORT} has stalled",
        f"{upper_first(JOB_TEXT)} has not finished an iteration for {{{{ $value | humanizeDuration }}}} while it still reports through the hooks (threshold {num(spec.bound)}s), or its hook went silent without closing (the process crashed or was killed).",
    )


def _straggler(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        straggler(spec.span, spec.bound, int(spec.param("min_ranks", 2))),
        f"Straggler: {JOB_SHORT} holds its job back",
        f'{upper_first(JOB_TEXT)} spends {{{{ $value | printf "%.2f" }}}}x the median time per iteration of its job\'s ranks outside communication over {spec.span} (threshold {num(1 + spec.bound)}x): the other ranks wait for it in their collectives.',
    )


def _regression(spec: AlertSpec, table: Thresholds) -> Built:
    baseline = spec.param("baseline", "1d")
    now, before = indent(mean_iteration(spec.span)), indent(mean_iteration(spec.span, baseline))
    return (
        f"(\n{now}\n)\n/\n(\n{before}\n)\n- 1 > {num(spec.bound)}",
        f"Iterations of {JOB_SHORT} are slower than {baseline} ago",
        f"The mean iteration time of {JOB_TEXT} over {spec.span} is {SHARE} above the same job's {baseline} earlier (threshold {pct(spec.bound)}).",
    )


def _goodput(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        goodput_low(spec),
        f"Training {JOB_SHORT} spends most of its time not training",
        f"{upper_first(JOB_TEXT)} spent {SHARE} of its time over {spec.span} in steps that moved training forward, below "
        f"{pct(spec.bound)}{healthy_note(spec, table)}; the rest went to start-ups, data waits, checkpoints, re-done steps, "
        "downtime between a crash and its restart, or idle gaps: npu_job_badput_seconds_total by kind, and diagnose names "
        "the largest with its lever.",
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
    "NPUJobGoodputLow": _goodput,
}
NO_THRESHOLD: set[str] = set()
NEEDS_RANGE = {
    "NPUMemcpyHigh",
    "NPUFrameworkOverheadHigh",
    "NPUIdleGapsHigh",
    "NPUIterationTimeRegression",
    "NPUJobStragglerRank",
    "NPUJobGoodputLow",
}
GROUP = ("cann-exporter-training", tuple(BUILDERS))
