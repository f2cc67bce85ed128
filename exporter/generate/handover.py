"""The handover from a dead exporter's alerts to CANNExporterDown: the down alert's expression
(any scrape job: a target that served the exporter's build info and is down now), the check
that every other alert keeps firing (keep_firing_for = alerting.handover) past its `for:`, so
Alertmanager's inhibition takes over before any of them could send "resolved", and the hold
that carries a firing alert across an outage (alerting.outage), so that an exporter restarted
within it continues its alerts instead of resolving and paging them again.

Why a hold in the expression and not a longer keep_firing_for: keep_firing_for cannot tell a dead
exporter from a chip that recovered, so 15 minutes of it would delay every genuine "resolved" by
15 minutes. The hold applies only while Prometheus fails to scrape the alert's own target
(``up == 0``): while the target answers, an alert ends as promptly as before. Each alert ``E``
becomes ``E or (its own firing series, held)``; see :func:`held`."""

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


def held(alert: str, severity: str, outage: str) -> str:
    """The alert's own firing series while its target is down, for at most ``outage`` after the
    target's last successful scrape: the branch appended to every alert but the down page,
    ``E or (held)``.

    - Identity: ``ALERTS`` carries the expression's labels plus alertname, alertstate and the
      rule's severity; dropping those three gives the expression's label set exactly, so
      ``or`` (which matches on every label but the name) keeps one series per alert, and the
      rule puts alertname and severity back. ``severity`` selects the rule's own tier.
    - Bound: only the target itself writes ``up == 1``; past ``outage`` without one the branch is
      empty, whatever the alert's own state, and the alert ends after keep_firing_for (no
      self-sustaining loop through ``ALERTS``).
    - Only firing alerts are held: a pending alert ends with its target's series and starts
      its `for:` again once the exporter answers (nothing was sent for it).
    - Any scrape job: the target is matched on the alert's own job and instance; a target that
      left service discovery (no ``up`` at all) is not held.
    - ``$value`` reads 1 while held: :func:`held_description` says what is held instead."""
    return (
        f'max without (alertname, alertstate, severity) (ALERTS{{alertname="{alert}", alertstate="firing", severity="{severity}"}})\n'
        f"and on (job, instance)\n(up == 0 and on (job, instance) max_over_time(up[{outage}]) == 1)"
    )


def with_hold(expr: str, alert: str, severity: str, outage: str) -> str:
    """``expr`` or the alert's firing series held across an outage (nothing held when ``outage`` is 0)."""
    if duration_seconds(outage) == 0:
        return expr
    return f"{expr.rstrip()}\nor\n(\n  " + held(alert, severity, outage).replace("\n", "\n  ") + "\n)"


def held_description(description: str, outage: str) -> str:
    """The description, or while the alert's target does not answer (its value then is the held
    series', 1), what is held and until when."""
    if duration_seconds(outage) == 0:
        return description
    return (
        "{{ if printf `up{job=%q, instance=%q} == 0` $labels.job $labels.instance | query }}"
        "The exporter on {{ $labels.instance }} (job {{ $labels.job }}) does not answer Prometheus "
        f"({HANDS_OVER_TO}): this alert keeps the state it had when the exporter last answered, for up "
        f"to {outage} after that (alerting.outage). Once the exporter answers again, it goes on firing if its condition "
        f"still holds, or resolves.{{{{ else }}}}{description}{{{{ end }}}}"
    )
