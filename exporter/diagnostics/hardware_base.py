"""What every hardware check of `diagnose` shares: subjects named as the alerts name them, a
finding at the hardware level, the verdict an alert's severity gives, and a reading above an
alert's temperature threshold. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from exporter.diagnostics.model import COUNT, HARDWARE, Finding, HardwareReadings, Labels, chip_subject
from exporter.thresholds.table import ABNORMAL, WARNING, AlertSpec


def subject(labels: Labels) -> str:
    where = chip_subject(labels.get("instance", ""), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))
    return where + (f" port {labels['port']}" if labels.get("port") else "")


def instance(labels: Labels) -> str:
    return labels.get("instance", "") or "this node"


def exporter_subject(labels: Labels) -> str:
    """The exporter of a node as a subject (its samples, its process, its sources)."""
    return f"{instance(labels)}: exporter"


def finding(
    check: str,
    title: str,
    labels: Labels | str,
    value: float | None,
    unit: str,
    verdict: str | None,
    alert: str | None,
    bounds: str = "",
    detail: str = "",
) -> Finding:
    return Finding(
        HARDWARE, check, title, labels if isinstance(labels, str) else subject(labels), value, unit, verdict, None, alert, bounds, detail
    )


def key(labels: Labels) -> tuple[str, ...]:
    """A chip (or port) of a node, whatever else its labels say."""
    return tuple(labels.get(k, "") for k in ("instance", "npu", "chip", "device", "port"))


def paged(spec: AlertSpec) -> str:
    """The verdict of a reading the alert pages on: abnormal for a critical alert, else warning."""
    return ABNORMAL if spec.severity == "critical" else WARNING


def by_subject(findings: Iterable[Finding]) -> list[Finding]:
    """Findings grouped by subject in natural order (NPU 2 before NPU 10), stable within one."""

    def order(f: Finding) -> tuple[object, ...]:
        return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", f.subject))

    return sorted(findings, key=order)


def too_hot(
    readings: HardwareReadings,
    spec: AlertSpec | None,
    metric: str,
    check: str,
    title: Callable[[Labels], str] | str,
    only: Callable[[Labels], bool] = lambda labels: True,
) -> list[Finding]:
    """A finding for each reading of ``metric`` (°C) above the alert's threshold (of the readings
    ``only`` keeps): warning, or abnormal for a critical alert."""
    if spec is None or spec.threshold is None:
        return []
    bounds = f"{paged(spec)} > {spec.threshold:g} °C"
    return [
        finding(check, title(labels) if callable(title) else title, labels, value, COUNT, paged(spec), spec.alert, bounds, f"{value:g} °C")
        for labels, value in readings.get(metric)
        if only(labels) and value > spec.threshold
    ]
