"""The training-jobs dashboard: the hooks' step timings and profile summaries per job."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import pct
from exporter.generate.energy_rules import PER_ITERATION, PER_SAMPLE
from exporter.generate.panels import (
    GREEN,
    JOB_LEGEND,
    JOB_SEL,
    ORANGE,
    RED,
    UTIL,
    Board,
    bars,
    datasource_var,
    graph,
    grid,
    indicator_steps,
    limit_steps,
    q,
    query_var,
)
from exporter.thresholds.table import Thresholds, num


def jobs(table_: Thresholds) -> Board:
    memcpy, framework, idle = table_["memcpy_share"], table_["framework_overhead_share"], table_["idle_share"]
    top3, hot, util = table_["top3_operator_share"], table_["max_operator_share"], table_["device_utilization"]
    mfu = table_["model_flops_utilization"]
    band = f"{pct(mfu.healthy or 0)}-{pct(mfu.ceiling or 1)}"
    reg = table_.find("NPUIterationTimeRegression")
    baseline = reg.param("baseline", "1d") if reg else "1d"
    stall = spec.threshold if (spec := table_.find("NPUTrainingStalled")) else None
    rate = "$__rate_interval"
    dur = "npu_job_iteration_duration_seconds"
    # Shares of a running rank only (a finished one's rates fall to 0 and would draw a climbing
    # idle share), clamped to 0..100% (a late scrape can put a phase counter ahead of the step sum).
    running = f'and on (job_name, rank) sum by (job_name, rank) (npu_job_state{{{JOB_SEL}, state="running"}}) == 1'
    straggler = table_.find("NPUJobStragglerRank")
    no_profile = " Empty until the job posts a profile summary (profiling windows) or an export of it is watched."
    variables = [
        datasource_var(),
        query_var("job", "Job", "label_values(npu_devices, job)"),
        query_var(
            "job_name",
            "Training job",
            'label_values({__name__=~"npu_job_info|npu_profile_last_update_timestamp_seconds", job=~"$job"}, job_name)',
        ),
    ]
    b = Board(
        "training-jobs",
        "Training jobs reporting through the hooks (npu_job_*) and their latest profiles (npu_profile_*): "
        "the three levels of the tuning method.",
        time_from="now-6h",
        variables=variables,
    )
    b.row("Macro: iterations and throughput")
    b.add(
        graph(
            "Iteration time",
            q(f"histogram_quantile(0.5, sum by (job_name, rank, le) (rate({dur}_bucket{{{JOB_SEL}}}[{rate}])))", "p50 " + JOB_LEGEND),
            q(f"histogram_quantile(0.99, sum by (job_name, rank, le) (rate({dur}_bucket{{{JOB_SEL}}}[{rate}])))", "p99 " + JOB_LEGEND),
            q(
                f"sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[{rate}]))",
                "mean " + JOB_LEGEND,
            ),
            unit="s",
            lo=0,
            description="p50 and p99 from each rank's 40 buckets around its median step, within 10% of the true quantiles "
            "(docs/training-hooks.md, Quantile accuracy); only the mean until a rank's first 8 steps fixed its buckets.",
        ),
        graph(
            "Throughput (samples/s)",
            q(f"sum by (job_name) (rate(npu_job_samples_total{{{JOB_SEL}}}[{rate}]))", "{{job_name}}"),
            q(f"sum by (job_name) (rate(npu_job_iterations_total{{{JOB_SEL}}}[{rate}]))", "{{job_name}} iterations/s"),
            unit="short",
            lo=0,
            description="Samples only from loops that pass samples= (the batch size) with their steps; iterations always.",
        ),
        graph(
            f"Iteration time vs {baseline} ago",
            q(
                f"(sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[1h])) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[1h])))\n"
                f"/ (sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[1h] offset {baseline})) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[1h] offset {baseline})))\n- 1",
                JOB_LEGEND,
            ),
            unit="percentunit",
            steps=limit_steps(reg.threshold if reg else None),
            description=f"Mean iteration time over 1h relative to the same job {baseline} earlier; NPUIterationTimeRegression fires above "
            f"{pct(reg.threshold if reg and reg.threshold is not None else 0)}. Empty until the job has run for {baseline}.",
        ),
        graph(
            "Time since the last iteration",
            q(f"time() - npu_job_last_iteration_timestamp_seconds{{{JOB_SEL}}}\n{running}", JOB_LEGEND),
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
        graph(
            "Idle gaps between iterations",
            q(f"clamp(1 - sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])), 0, 1)\n{running}", JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(idle),
            lo=0,
            hi=1,
            description=f"Wall time outside the reported steps (macro level: is the task stream continuous?); healthy {idle.healthy_text()}. "
            "Running ranks only: a finished rank shows in Job state instead.",
        ),
        graph(
            "Utilization of the jobs' chips",
            q(
                f'{UTIL}{{job=~"$job"}}\n  * on (job, instance, device) group_right\n  group by (job, instance, device, job_name, rank) (npu_job_info{{{JOB_SEL}}})',
                JOB_LEGEND,
            ),
            unit="percentunit",
            steps=indicator_steps(util),
            lo=0,
            hi=1,
            description="The AI Core utilization of the chip each rank reports (npu_job_info device). Empty for a CPU job: "
            "it reports no chip.",
        ),
        graph(
            "Model FLOPs utilization (MFU)",
            q(f"npu_job_model_flops_utilization_ratio{{{JOB_SEL}}}", JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(mfu),
            lo=0,
            hi=1,
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
    )
    b.row("Meso: where the step time goes")
    share = f"clamp(\n  sum by (job_name, rank, phase, stage) (rate(npu_job_phase_seconds_total{{{JOB_SEL}}}[{rate}]))\n  / on (job_name, rank) group_left\n  sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])),\n  0, 1\n)\n{running}"
    b.add(
        graph(
            "Step phases",
            q(share, "{{job_name}}/{{rank}} {{phase}} ({{stage}})"),
            unit="percentunit",
            stack=True,
            lo=0,
            hi=1,
            description="Share of the iteration time in each phase the hooks report (running ranks), under the name the loop "
            "gave it (its stage in brackets); exclusive time, so the shares add up to at most 100%. Empty for a loop that reports "
            "no phase().",
        ),
        graph(
            "Time outside communication per iteration, by rank",
            q(
                f"(\n  sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}]))\n"
                f'  - (sum by (job_name, rank) (rate(npu_job_phase_seconds_total{{{JOB_SEL}, stage="communication"}}[{rate}])) '
                f"or 0 * sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])))\n)\n"
                f"/ sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[{rate}]))",
                JOB_LEGEND,
            ),
            unit="s",
            lo=0,
            description="In synchronous data parallel every rank steps at one rate and the others wait for the slowest in "
            "their collectives: the rank above the others is the straggler (NPUJobStragglerRank above "
            f"{num(1 + (straggler.threshold or 0) if straggler else 1.2)}x the job's median). Without a communication "
            "phase, the whole iteration.",
        ),
        graph(
            "Memory-copy share (H2D + D2H)",
            q(
                f'clamp(\n  sum by (job_name, rank) (rate(npu_job_phase_seconds_total{{{JOB_SEL}, stage=~"h2d|d2h"}}[{rate}]))\n'
                f"  / sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])),\n  0, 1\n)\n{running}",
                JOB_LEGEND,
            ),
            q(f"npu_profile_memcpy_ratio{{{JOB_SEL}}}", "profile " + JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(memcpy),
            lo=0,
            hi=1,
            description=f"Healthy {memcpy.healthy_text()}, abnormal {memcpy.abnormal_text()} (NPUMemcpyHigh). Empty for a loop "
            "without h2d/d2h phases (a CPU job copies nothing to a device).",
        ),
        graph(
            "Framework overhead share",
            q(
                f'clamp(\n  sum by (job_name, rank) (rate(npu_job_phase_seconds_total{{{JOB_SEL}, stage="framework"}}[{rate}]))\n'
                f"  / sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])),\n  0, 1\n)\n{running}",
                JOB_LEGEND,
            ),
            q(f"npu_profile_framework_overhead_ratio{{{JOB_SEL}}}", "profile " + JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(framework),
            lo=0,
            hi=1,
            description=f"Healthy {framework.healthy_text()} (NPUFrameworkOverheadHigh). Empty for a loop without a framework "
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
        grid(
            "Reporting processes",
            q(f"npu_job_info{{{JOB_SEL}}}", table_format=True),
            hidden=("__name__", "Value"),
            description="One row per rank reporting through the hooks; device is empty for a CPU job.",
        ),
    )
    b.row("Micro: latest profiles")
    pro = f"{{{JOB_SEL}}}"
    b.add(
        bars(
            "Step composition (latest profile)",
            q(f"npu_profile_compute_ratio{pro}", "compute " + JOB_LEGEND),
            q(f"npu_profile_communication_ratio{pro}", "communication " + JOB_LEGEND),
            q(f"npu_profile_idle_ratio{pro}", "idle " + JOB_LEGEND),
            q(f"npu_profile_memcpy_ratio{pro}", "memcpy " + JOB_LEGEND),
            q(f"npu_profile_framework_overhead_ratio{pro}", "framework " + JOB_LEGEND),
            unit="percentunit",
            lo=0,
            hi=1,
            description="Device step time shares of the latest profile." + no_profile,
        ),
        grid(
            "Top operators (latest profile)",
            q(f"npu_profile_operator_time_ratio{pro}", table_format=True),
            unit="percentunit",
            steps=limit_steps(hot.abnormal, RED),
            hidden=("__name__", "job", "instance"),
            sort="position",
            description="Operator types by share of kernel time (a CPU job's are host operators: no NPU advice applies)." + no_profile,
        ),
        bars(
            "Top-3 and hottest operator share",
            q(f"npu_profile_top3_operator_ratio{pro}", "top 3 " + JOB_LEGEND),
            q(f"npu_profile_max_operator_ratio{pro}", "hottest " + JOB_LEGEND),
            unit="percentunit",
            steps=[
                dm.Threshold(value=None, color=GREEN),
                dm.Threshold(value=top3.healthy, color=ORANGE),
                dm.Threshold(value=hot.abnormal, color=RED),
            ],
            lo=0,
            hi=1,
            description=f"Top 3 healthy {top3.healthy_text()}; one operator abnormal {hot.abnormal_text()}." + no_profile,
        ),
        graph(
            "Profiled step time",
            q(f"npu_profile_step_duration_seconds{pro}", JOB_LEGEND),
            unit="s",
            lo=0,
            description="Mean step time over the profiled window." + no_profile,
        ),
        graph(
            "Profile age",
            q(f"time() - npu_profile_last_update_timestamp_seconds{pro}", JOB_LEGEND),
            unit="s",
            lo=0,
            description="Seconds since the latest profile was produced; a finished job's posted profiles go with it." + no_profile,
        ),
    )
    return b
