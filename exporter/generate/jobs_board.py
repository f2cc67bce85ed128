"""The training-jobs dashboard: the hooks' step timings and profile summaries per job, at the
three levels of the tuning method (macro: iterations; meso: step phases; micro: profiles)."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.board import Board, Variable, datasource_var, job_var, query_var
from exporter.generate.common import pct, positive
from exporter.generate.energy_rules import PER_ITERATION, PER_SAMPLE
from exporter.generate.goodput_row import goodput_row
from exporter.generate.panels import (
    GREEN,
    JOB_LEGEND,
    JOB_SEL,
    ORANGE,
    RATIO,
    RED,
    UTIL,
    Panel,
    alert_steps,
    bars,
    graph,
    grid,
    indicator_steps,
    info_grid,
    limit_steps,
    q,
    rate,
    threshold,
)
from exporter.thresholds.table import Indicator, Thresholds, num

RANK = "job_name, rank"
DURATION = "npu_job_iteration_duration_seconds"
PHASES = "npu_job_phase_seconds_total"
# Shares of a running rank only (a finished one's rates fall to 0 and would draw a climbing
# idle share), clamped to 0..100% (a late scrape can put a phase counter ahead of the step sum).
RUNNING = f'and on (job_name, rank) sum by (job_name, rank) (npu_job_state{{{JOB_SEL}, state="running"}}) == 1'
NO_PROFILE = " Empty until the job posts a profile summary (profiling windows) or an export of it is watched."


def jobs(table_: Thresholds) -> Board:
    return (
        Board(
            "training-jobs",
            "Training jobs reporting through the hooks (npu_job_*) and their latest profiles (npu_profile_*): "
            "the three levels of the tuning method.",
            time_from="now-6h",
            variables=_variables(),
        )
        .row("Macro: iterations and throughput", *_iterations(table_), *_device_use(table_))
        .row("Goodput: where the job's NPU time goes", *goodput_row(table_))
        .row("Meso: where the step time goes", *_phases(table_))
        .row("Micro: latest profiles", *_profiles(table_))
    )


def _variables() -> list[Variable]:
    jobs_ = 'label_values({__name__=~"npu_job_info|npu_profile_last_update_timestamp_seconds", job=~"$job"}, job_name)'
    return [datasource_var(), job_var(), query_var("job_name", "Training job", jobs_)]


def _per_rank(metric: str, matchers: str = "", window: str = "$__rate_interval", offset: str = "") -> str:
    return rate(metric, RANK, JOB_SEL + matchers, window, offset)


def _mean_iteration(window: str = "$__rate_interval", offset: str = "") -> str:
    iterations = _per_rank(DURATION + "_count", window=window, offset=offset)
    return f"{_per_rank(DURATION + '_sum', window=window, offset=offset)} / {positive(iterations)}"


def _quantile(quantile: str) -> str:
    """The ranks' iteration time quantile, where they finished iterations (none: no quantile, not NaN)."""
    buckets = rate(DURATION + "_bucket", RANK + ", le", JOB_SEL)
    return f"histogram_quantile({quantile}, {buckets})\nand on ({RANK}) {positive(_per_rank(DURATION + '_count'))}"


def _stage_share(matchers: str) -> str:
    """The share of the running ranks' step time in the phases of ``matchers`` (their stage)."""
    return f"clamp(\n  {_per_rank(PHASES, matchers)}\n  / {positive(_per_rank(DURATION + '_sum'))},\n  0, 1\n)\n{RUNNING}"


def _iterations(table_: Thresholds) -> list[Panel]:
    reg, stall = table_.find("NPUIterationTimeRegression"), threshold(table_.find("NPUTrainingStalled"))
    baseline = reg.param("baseline", "1d") if reg else "1d"
    return [
        graph(
            "Iteration time",
            q(_quantile("0.5"), "p50 " + JOB_LEGEND),
            q(_quantile("0.99"), "p99 " + JOB_LEGEND),
            q(_mean_iteration(), "mean " + JOB_LEGEND),
            unit="s",
            lo=0,
            description="p50 and p99 from each rank's 40 buckets around its median step, within 10% of the true quantiles "
            "(docs/training-hooks.md, Quantile accuracy); only the mean until a rank's first 8 steps fixed its buckets.",
        ),
        graph(
            "Throughput (samples/s)",
            q(rate("npu_job_samples_total", "job_name", JOB_SEL), "{{job_name}}"),
            q(rate("npu_job_iterations_total", "job_name", JOB_SEL), "{{job_name}} iterations/s"),
            lo=0,
            description="Samples only from loops that pass samples= (the batch size) with their steps; iterations always.",
        ),
        graph(
            f"Iteration time vs {baseline} ago",
            q(f"({_mean_iteration('1h')})\n/ {positive(_mean_iteration('1h', baseline))}\n- 1", JOB_LEGEND),
            unit="percentunit",
            steps=alert_steps(reg),
            description=f"Mean iteration time over 1h relative to the same job {baseline} earlier; NPUIterationTimeRegression fires above "
            f"{pct(threshold(reg) or 0)}. Empty until the job has run for {baseline}.",
        ),
        graph(
            "Time since the last iteration",
            q(f"time() - npu_job_last_iteration_timestamp_seconds{{{JOB_SEL}}}\n{RUNNING}", JOB_LEGEND),
            unit="s",
            steps=limit_steps(stall),
            lo=0,
            description=f"Running ranks; NPUTrainingStalled fires above {num(stall or 0)} s, or at once for a rank whose hook went "
            "silent without closing (state stalled).",
        ),
        grid(
            "Job state",
            q(f"npu_job_state{{{JOB_SEL}}} == 1", table_format=True),
            hidden=("__name__", "Value", "job"),
            description="running; finished: the hook closed (close(), end of training, interpreter exit), served for "
            "ingest.finished_ttl, no job alert fires for it; stalled: no report, not even a heartbeat, without closing (crashed).",
        ),
    ]


def _device_use(table_: Thresholds) -> list[Panel]:
    idle, mfu = table_["idle_share"], table_["model_flops_utilization"]
    band = f"{pct(mfu.healthy or 0)}-{pct(mfu.ceiling or 1)}"
    on_job_chips = f'{UTIL}{{job=~"$job"}}\n  * on (job, instance, device) group_right\n  group by (job, instance, device, job_name, rank) (npu_job_info{{{JOB_SEL}}})'
    return [
        graph(
            "Idle gaps between iterations",
            q(f"clamp(1 - {_per_rank(DURATION + '_sum')}, 0, 1)\n{RUNNING}", JOB_LEGEND),
            **RATIO,
            steps=indicator_steps(idle),
            description=f"Wall time outside the reported steps (macro level: is the task stream continuous?); healthy {idle.healthy_text()}. "
            "Running ranks only: a finished rank shows in Job state instead.",
        ),
        graph(
            "Utilization of the jobs' chips",
            q(on_job_chips, JOB_LEGEND),
            **RATIO,
            steps=indicator_steps(table_["device_utilization"]),
            description="The AI Core utilization of the chip each rank reports (npu_job_info device). Empty for a CPU job: "
            "it reports no chip.",
        ),
        graph(
            "Model FLOPs utilization (MFU)",
            q(f"npu_job_model_flops_utilization_ratio{{{JOB_SEL}}}", JOB_LEGEND),
            **RATIO,
            steps=indicator_steps(mfu),
            description="Declared model FLOPs of the steps (the hooks' flops_per_step, or TorchMonitor's measure_flops) over "
            "their time over the chip's peak (npu_peak_flops_per_second at the job's precision); absent without declared FLOPs, "
            f"a device or a published peak. Large-model training commonly reaches {band} (PaLM 540B: 46.2%, Chowdhery et al. "
            "2022, arXiv:2204.02311); below it, diagnose warns.",
        ),
        graph(
            "Energy per iteration and per sample",
            q(f'{PER_ITERATION}{{job_name=~"$job_name"}}', "{{job_name}} per iteration"),
            q(f'{PER_SAMPLE}{{job_name=~"$job_name"}}', "{{job_name}} per sample"),
            unit="joule",
            lo=0,
            description="Energy of the job's chips (npu_energy_joules_total of the devices npu_job_info names, 5m) over its "
            "iterations per second (the mean of its ranks) and its samples per second (summed over its ranks: loops that pass "
            "samples= only). Empty for a CPU job, a job that stopped stepping, or an exporter without the energy counter.",
        ),
    ]


def _share(title: str, matchers: str, profile: str, indicator: Indicator, description: str) -> Panel:
    """The share of the steps in some phases, from the hooks and from the latest profile."""
    return graph(
        title,
        q(_stage_share(matchers), JOB_LEGEND),
        q(f"{profile}{{{JOB_SEL}}}", "profile " + JOB_LEGEND),
        **RATIO,
        steps=indicator_steps(indicator),
        description=description,
    )


def _phases(table_: Thresholds) -> list[Panel]:
    memcpy, framework, straggler = table_["memcpy_share"], table_["framework_overhead_share"], table_.find("NPUJobStragglerRank")
    phases = f"clamp(\n  {rate(PHASES, RANK + ', phase, stage', JOB_SEL)}\n  / on (job_name, rank) group_left ()\n  {positive(_per_rank(DURATION + '_sum'))},\n  0, 1\n)\n{RUNNING}"
    busy, communication = _per_rank(DURATION + "_sum"), _per_rank(PHASES, ', stage="communication"')
    outside = f"(\n  {busy}\n  - ({communication} or 0 * {busy})\n)\n/ {positive(_per_rank(DURATION + '_count'))}"
    return [
        graph(
            "Step phases",
            q(phases, "{{job_name}}/{{rank}} {{phase}} ({{stage}})"),
            **RATIO,
            stack=True,
            description="Share of the iteration time in each phase the hooks report (running ranks), under the name the loop "
            "gave it (its stage in brackets); exclusive time, so the shares add up to at most 100%. Empty for a loop that reports "
            "no phase().",
        ),
        graph(
            "Time outside communication per iteration, by rank",
            q(outside, JOB_LEGEND),
            unit="s",
            lo=0,
            description="In synchronous data parallel every rank steps at one rate and the others wait for the slowest in "
            "their collectives: the rank above the others is the straggler (NPUJobStragglerRank above "
            f"{num(1 + (straggler.threshold or 0) if straggler else 1.2)}x the job's median). Without a communication "
            "phase, the whole iteration.",
        ),
        _share(
            "Memory-copy share (H2D + D2H)",
            ', stage=~"h2d|d2h"',
            "npu_profile_memcpy_ratio",
            memcpy,
            f"Healthy {memcpy.healthy_text()}, abnormal {memcpy.abnormal_text()} (NPUMemcpyHigh). Empty for a loop "
            "without h2d/d2h phases (a CPU job copies nothing to a device).",
        ),
        _share(
            "Framework overhead share",
            ', stage="framework"',
            "npu_profile_framework_overhead_ratio",
            framework,
            f"Healthy {framework.healthy_text()} (NPUFrameworkOverheadHigh). Empty for a loop without a framework "
            "phase and without a profile.",
        ),
        graph(
            "Framework memory (allocator)",
            q(f"npu_job_memory_allocated_bytes{{{JOB_SEL}}}", JOB_LEGEND),
            q(f"npu_job_memory_max_allocated_bytes{{{JOB_SEL}}}", "peak " + JOB_LEGEND),
            unit="bytes",
            lo=0,
            description="The framework allocator on the device (torch adapters on an NPU). Empty for a CPU job: no device allocator.",
        ),
        info_grid(
            "Reporting processes",
            f"npu_job_info{{{JOB_SEL}}}",
            hidden=("__name__", "Value"),
            description="One row per rank reporting through the hooks; device is empty for a CPU job.",
        ),
    ]


def _profiles(table_: Thresholds) -> list[Panel]:
    top3, hot = table_["top3_operator_share"], table_["max_operator_share"]
    parts = ("compute", "communication", "idle", "memcpy", "framework_overhead")

    def latest(metric: str) -> str:
        return f"npu_profile_{metric}{{{JOB_SEL}}}"

    return [
        bars(
            "Step composition (latest profile)",
            *[q(latest(f"{part}_ratio"), f"{part.removesuffix('_overhead')} {JOB_LEGEND}") for part in parts],
            **RATIO,
            description="Device step time shares of the latest profile." + NO_PROFILE,
        ),
        grid(
            "Top operators (latest profile)",
            q(latest("operator_time_ratio"), table_format=True),
            unit="percentunit",
            steps=limit_steps(hot.abnormal, RED),
            hidden=("__name__", "job", "instance"),
            sort="position",
            description="Operator types by share of kernel time (a CPU job's are host operators: no NPU advice applies)." + NO_PROFILE,
        ),
        bars(
            "Top-3 and hottest operator share",
            q(latest("top3_operator_ratio"), "top 3 " + JOB_LEGEND),
            q(latest("max_operator_ratio"), "hottest " + JOB_LEGEND),
            **RATIO,
            steps=[
                dm.Threshold(value=None, color=GREEN),
                dm.Threshold(value=top3.healthy, color=ORANGE),
                dm.Threshold(value=hot.abnormal, color=RED),
            ],
            description=f"Top 3 healthy {top3.healthy_text()}; one operator abnormal {hot.abnormal_text()}." + NO_PROFILE,
        ),
        graph(
            "Profiled step time",
            q(latest("step_duration_seconds"), JOB_LEGEND),
            unit="s",
            lo=0,
            description="Mean step time over the profiled window." + NO_PROFILE,
        ),
        graph(
            "Profile age",
            q(f"time() - {latest('last_update_timestamp_seconds')}", JOB_LEGEND),
            unit="s",
            lo=0,
            description="Seconds since the latest profile was produced; a finished job's posted profiles go with it." + NO_PROFILE,
        ),
    ]
