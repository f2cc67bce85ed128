"""The handover from a dead exporter's alerts to CANNExporterDown: the down alert's expression
(any scrape job: a target that served the exporter's build info and is down now), and the check
that every other alert keeps firing (keep_firing_for = alerting.handover) past its `for:`, so
Alertmanager's inhibition takes over before any of them could send "resolved"."""

from __future__ import annotations

from exporter.thresholds.table import AlertSpec, Thresholds, duration_seconds

EXPORTER_INFO = "cann_exporter_build_info"  # a series only this exporter serves, whatever the scrape job


def exporter_down(selector: str, lookback: str) -> str:
    """Targets that served the exporter's build info within ``lookback`` and are now down (any
    job name; ``selector`` narrows them), or no target that served it within ``lookback`` at all
    (a new install that scrapes no exporter; never beside the per-target form)."""
    sel = f"{{{selector}}}" if selector else ""
    return (
        f"up{sel} == 0\nand on (job, instance)\n  max_over_time({EXPORTER_INFO}{sel}[{lookback}])\n"
        f"or\nabsent_over_time({EXPORTER_INFO}{sel}[{lookback}])"
    )


# The alert every other one hands over to when its target stops answering (alerting.handover).
HANDS_OVER_TO = "CANNExporterDown"


def handover_problem(table: Thresholds) -> str | None:
    """Why the table's handover cannot bridge to CANNExporterDown, or None: the other alerts must
    keep firing longer than the down alert's `for:` (docs/runbooks.md#cannexporterdown: by at
    least an evaluation interval and a scrape interval)."""
    down = next((a for a in table.alerts if a.alert == HANDS_OVER_TO), None)
    if down is None or duration_seconds(table.alerting.handover) > duration_seconds(down.window):
        return None
    return (
        f"alerting.handover {table.alerting.handover}: must be longer than {HANDS_OVER_TO}'s window {down.window}, "
        f"or a dead exporter's alerts resolve before it fires"
    )


def exporter_down_alert(spec: AlertSpec, table: Thresholds) -> tuple[str, str, str]:
    """CANNExporterDown's (expression, summary, description)."""
    sel = table.alerting.exporter_selector
    lookback = spec.param("lookback", "1d")
    which = f" matching {{{sel}}}" if sel else ""
    return (
        exporter_down(sel, lookback),
        "cann-exporter is down{{ with $labels.instance }} on {{ . }}{{ end }}",
        (
            f"{{{{ with $labels.instance }}}}Prometheus cannot scrape the NPU exporter on {{{{ . }}}} (job "
            f"{{{{ $labels.job }}}}), which answered within the last {lookback}, for {spec.window}: no NPU metrics "
            f"from it, and its alerts are muted until it answers again.{{{{ else }}}}No target{which} has served "
            f"{EXPORTER_INFO} within the last {lookback}: Prometheus scrapes no cann-exporter at all.{{{{ end }}}}"
        ),
    )
