"""Alertmanager inhibit rules for the contract alerts: one list, written by `cann-exporter
generate` to alertmanager/cann-exporter.inhibit.yml; the docker-compose Alertmanager config
carries the same list and the Kubernetes copies (an AlertmanagerConfig, and the plain file in
the prometheus-scrape overlay) are generated from that file (tests/deploy check both).

Each rule keeps one page per cause: when the source alert fires, target alerts with equal
values of `equal` are muted (Alertmanager never lets an alert mute itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

UTILIZATION = 'alertname=~"NPULowUtilization|NPUUtilizationUnstable"'
CHIP = ("instance", "npu", "chip")  # always present on chip alerts (device is empty without a logic id)


@dataclass(frozen=True)
class Inhibit:
    why: str
    source: tuple[str, ...]
    target: tuple[str, ...]
    equal: tuple[str, ...]

    def rule(self) -> dict[str, Any]:
        return {"source_matchers": list(self.source), "target_matchers": list(self.target), "equal": list(self.equal)}


INHIBITS = (
    Inhibit(
        "A node whose exporter cannot be scraped: its other alerts are stale or about to resolve; the page is the "
        "exporter (the absent() form, without an instance, mutes nothing).",
        ('alertname="CANNExporterDown"', 'instance=~".+"'),
        ('alertname=~"NPU.+|CANNExporter.+"', 'alertname!="CANNExporterDown"'),
        ("instance",),
    ),
    Inhibit(
        "A node missing a chip: the jobs of its other chips fail or wait, their utilization alerts are symptoms "
        "(NPUMissing is per node: the missing chip itself has no series).",
        ('alertname="NPUMissing"',),
        (UTILIZATION,),
        ("instance",),
    ),
    Inhibit(
        "A chip whose fault codes say it must leave service (NPUNeedsIsolation, SeparateNPU or PreSeparateNPU): "
        "that is the page; the chip's other alerts (its health, ECC, utilization, links) follow from the fault.",
        ('alertname="NPUNeedsIsolation"',),
        ('alertname=~"NPU.+"', 'alertname!="NPUNeedsIsolation"'),
        CHIP,
    ),
    Inhibit(
        "A chip in Alarm or Critical health: its low or unstable utilization follows from it.",
        ('alertname="NPUUnhealthy"',),
        (UTILIZATION,),
        CHIP,
    ),
    Inhibit(
        "One utilization page per chip: NPULowUtilization (the first to fire, for: 10m against 15m, and the "
        "broader) mutes NPUUtilizationUnstable; its runbook's macro step shows the saw-tooth.",
        ('alertname="NPULowUtilization"',),
        ('alertname="NPUUtilizationUnstable"',),
        CHIP,
    ),
    Inhibit(
        "One operator page per training rank: the hottest operator above 70% also makes the top three dominate.",
        ('alertname="NPUHotOperator"',),
        ('alertname="NPUTopOperatorsDominant"',),
        ("instance", "job_name", "rank"),
    ),
    Inhibit(
        "A chip that lost a page to a double-bit error pages once: the critical tier of the isolation alert "
        "(firing until the chip is replaced) covers the error alert of the same chip.",
        ('alertname="NPUMemoryPagesIsolated"', 'severity="critical"'),
        ('alertname="NPUECCDoubleBitErrors"',),
        CHIP,
    ),
)


def inhibit_rules() -> list[dict[str, Any]]:
    """The `inhibit_rules` of an Alertmanager configuration."""
    return [inhibit.rule() for inhibit in INHIBITS]


def inhibit_comment() -> str:
    return (
        "Alertmanager inhibit rules for the cann-exporter alerts (exporter/generate/inhibit.py): paste\n"
        "`inhibit_rules` into your "
        "alertmanager.yml (deploy/docker-compose/alertmanager/alertmanager.yml carries the same list).\n"
        + "\n".join(f"{n}. {inhibit.why}" for n, inhibit in enumerate(INHIBITS, 1))
    )
