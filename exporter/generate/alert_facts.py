"""What the alert table says, for dashboard panels: whether an alert is in it, and what
NPUMemoryPagesIsolated's tiers mean."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.generate.chip_rules import isolated_pages_limit
from exporter.generate.common import num
from exporter.generate.thresholds import Thresholds


def has_alert(table_: Thresholds, alert: str) -> bool:
    return any(a.alert == alert for a in table_.alerts)


@dataclass(frozen=True)
class Isolation:
    limit: float
    text: str


def page_isolation(table_: Thresholds) -> Isolation | None:
    """NPUMemoryPagesIsolated's critical page count and what its tiers mean, for panel descriptions."""
    if not has_alert(table_, "NPUMemoryPagesIsolated"):
        return None
    spec = table_.alert("NPUMemoryPagesIsolated")
    limit = isolated_pages_limit(spec)
    return Isolation(
        limit,
        (
            f"Pages the driver took out of use after ECC errors (all memories and types). "
            f"NPUMemoryPagesIsolated warns on any new page within {spec.range} and is critical on a "
            f"page after a double-bit error or above {num(limit)} pages."
        ),
    )
