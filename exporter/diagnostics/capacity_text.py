"""The capacity report's numbers in words, each with the precision it needs: shares, chip-hours,
kWh, costs, counts and the forecasts' sentences, as the summary, the HTML page and capacity.json
write them."""

from __future__ import annotations

from exporter.diagnostics.forecast import Forecast


def pct_text(value: float | None) -> str:
    """A share as a percentage, one decimal; a non-zero share that would read 0.0% reads <0.1%."""
    if value is None:
        return "n/a"
    if 0 < abs(value) < 0.0005:
        return "<0.1%"
    return f"{value * 100:.1f}%"


def hours_text(value: float | None) -> str:
    """Chip-hours with the precision they need: 1,234 / 56.7 / 3.21 / 0.49 / 0."""
    if value is None:
        return "n/a"
    size = abs(value)
    if size == 0:
        return "0"
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.2g}" if size >= 0.001 else "<0.001"


def kwh_text(value: float | None) -> str:
    """kWh with the precision they need: 1,234 / 56.7 / 3.21 / 0.049."""
    if value is None:
        return "n/a"
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.2g}"


def cost_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def count_text(value: float | None, noun: str) -> str:
    n = int(value or 0)
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def forecast_text(f: Forecast) -> str:
    per_week = f.slope_per_day * 7
    trend = f"{per_week:+.2f} chips/week" if f.unit == "count" else f"{per_week * 100:+.1f} points/week"
    if f.limit is None:
        return f"Forecast, {f.name}: {trend} (linear fit of daily values)."
    if f.days_to_limit is None:
        return f"Forecast, {f.name}: {trend}; not heading for {_limit(f)}."
    if f.days_to_limit == 0:
        return f"Forecast, {f.name}: already at {_limit(f)}."
    when = f"in about {f.days_to_limit:.1f} days" if f.days_to_limit <= 365 else "in more than a year"
    return f"Forecast, {f.name}: {trend}; reaches {_limit(f)} {when} at this rate."


def _limit(f: Forecast) -> str:
    return f"{f.limit:g} chips" if f.unit == "count" else f"{(f.limit or 0) * 100:g}%"
