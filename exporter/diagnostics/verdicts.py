"""Judging a value against the threshold table, for the checks of `diagnose`: an indicator's
bounds in words, its verdict and alert; and numbers as the findings write them.
Where the table lacks a row or an alert, the value is shown without a verdict."""

from __future__ import annotations

from exporter.diagnostics.model import RATIO, Finding
from exporter.thresholds.table import Indicator, Thresholds


def bounds_text(indicator: Indicator) -> str:
    parts = []
    if indicator.healthy_text():
        parts.append(f"healthy {indicator.healthy_text()}")
    if indicator.abnormal_text():
        parts.append(f"abnormal {indicator.abnormal_text()}")
    return ", ".join(parts)


def judge(table: Thresholds, indicator_id: str, value: float) -> tuple[str | None, str, str | None]:
    """(verdict, bounds text, alert) of ``value``; no verdict when the table lacks the row."""
    if indicator_id not in table:
        return None, "", None
    indicator = table[indicator_id]
    return indicator.verdict(value), bounds_text(indicator), indicator.alert


def judged(
    level: str, check: str, title: str, subject: str, value: float, indicator_id: str, table: Thresholds, detail: str = ""
) -> Finding:
    """A ratio judged by the table's row ``indicator_id``."""
    verdict, bounds, alert = judge(table, indicator_id, value)
    return Finding(level, check, title, subject, value, RATIO, verdict, indicator_id, alert, bounds, detail)


def pct(value: float) -> str:
    return f"{value * 100:.1f}%".replace(".0%", "%")


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g}h"
    if seconds >= 60:
        return f"{seconds / 60:.3g}m"
    return f"{seconds:.3g}s"
