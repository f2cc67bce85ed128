"""The training-jobs dashboard's goodput row: how much of each job's time moved training forward
(the goodput ratio), where the rest went (badput by kind, stacked), the restarts, and the
NPU-hours of each kind over the dashboard's range (docs/training-hooks.md, "Goodput and badput")."""

from __future__ import annotations

from exporter.generate.common import indent, pct
from exporter.generate.goodput_rules import BADPUT, GOODPUT, MFU_WALL, badput_ratio, goodput_ratio, grown
from exporter.generate.panels import ANY_RED, JOB_SEL, RATIO, Panel, graph, grid, indicator_steps, q
from exporter.thresholds.table import Thresholds


def _clamped(expr: str) -> str:
    """A share within 0..100% (goodput and badput are read in one scrape, so only a rounding can
    stray). Not for running ranks only, unlike the step shares: a rank between a crash and its
    restart (stalled) is where the downtime goes."""
    return f"clamp(\n{indent(expr)},\n  0, 1\n)"


def goodput_row(table: Thresholds) -> list[Panel]:
    goodput, alert = table["goodput"], table.find("NPUJobGoodputLow")
    fires = f"; NPUJobGoodputLow pages a running rank below {pct(alert.bound)} over {alert.span} for {alert.window}" if alert else ""
    return [
        graph(
            "Goodput",
            q(_clamped(goodput_ratio("job_name", "$__rate_interval", JOB_SEL)), "{{job_name}}"),
            q(_clamped(goodput_ratio("job_name", "1h", JOB_SEL)), "{{job_name}} 1h"),
            **RATIO,
            steps=indicator_steps(goodput),
            description=f"Share of the job's wall time (all ranks, across restarts) in steps that moved training forward; "
            f"healthy {goodput.healthy_text()}{fires}. Empty while no rank reports a step.",
        ),
        graph(
            "Where the time goes",
            q(_clamped(goodput_ratio("job_name", "$__rate_interval", JOB_SEL)), "{{job_name}} goodput"),
            q(_clamped(badput_ratio("job_name", "$__rate_interval", JOB_SEL)), "{{job_name}} {{kind}}"),
            **RATIO,
            stack=True,
            description="Goodput and each kind of badput as a share of the job's wall time, stacked to 100%: startup (a "
            "process's start to its first step), data_wait, checkpoint_save, checkpoint_restore, lost_progress (steps "
            "re-done after a restart), downtime (no process between a death and the restart), idle (gaps no phase explains), "
            "other (evaluation and other phases between steps).",
        ),
        graph(
            "Restarts",
            q(f"sum by (job_name) (increase(npu_job_disruptions_total{{{JOB_SEL}}}[1h]))", "{{job_name}}"),
            lo=0,
            steps=ANY_RED,
            description="Processes of the job's ranks that died and were followed by another, in the last hour "
            "(npu_job_disruptions_total; the restart took the rank over at once when the exporter knew the old one dead).",
        ),
        graph(
            "MFU over the wall time",
            q(f'{MFU_WALL}{{job_name=~"$job_name"}}', "{{job_name}}"),
            **RATIO,
            description="Model FLOPs utilization x goodput (1h): what the job's chips delivered against their peak over all "
            "the time it held them, start-ups, checkpoints and restarts included. Empty without declared FLOPs.",
        ),
        grid(
            "NPU-hours over the range",
            q(
                f'sum by (job_name, kind) (label_replace({grown(GOODPUT, "$__range", JOB_SEL)}, "kind", "goodput", "", "")) / 3600\n'
                f"or\nsum by (job_name, kind) {grown(BADPUT, '$__range', JOB_SEL)} / 3600",
                table_format=True,
            ),
            unit="h",
            description="Rank-hours (one NPU each) of goodput and of each badput kind over the dashboard's range; `report` "
            "gives the same per job and namespace over a month.",
        ),
    ]
