"""Linear forecasts of daily values (the capacity report's): least squares through one value
per day, projected ahead, with the days until a limit is reached."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.thresholds.records import MIN_FORECAST_DAYS

__all__ = ["MIN_FORECAST_DAYS", "Forecast"]

Point = tuple[float, float]
DAY = 86400.0


@dataclass(frozen=True)
class Forecast:
    name: str  # e.g. "chips in use"
    unit: str  # ratio, count
    daily: tuple[Point, ...]  # (day middle, daily value) the fit is made on
    slope_per_day: float
    intercept: float  # value at t = 0 (unix)
    horizon_days: float
    limit: float | None = None  # value whose crossing is reported
    days_to_limit: float | None = None  # from the end of the window; None: not on this trend

    def at(self, t: float) -> float:
        return self.intercept + self.slope_per_day * t / DAY


def linear_fit(points: Sequence[Point]) -> tuple[float, float] | None:
    """Least squares (slope per second, intercept); None for fewer than 2 distinct x."""
    if len(points) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return slope, my - slope * mx


def daily(points: Iterable[Point], start: float, reduce: str = "mean") -> tuple[Point, ...]:
    """Values per whole day from ``start``, at each day's middle."""
    days: dict[int, list[float]] = {}
    for t, v in points:
        days.setdefault(int((t - start) // DAY), []).append(v)
    pick = max if reduce == "max" else statistics.fmean
    return tuple((start + (d + 0.5) * DAY, pick(vs)) for d, vs in sorted(days.items()))


def forecast(
    name: str,
    unit: str,
    points: Sequence[Point],
    end: float,
    horizon_days: float,
    limit: float | None = None,
    min_days: int = MIN_FORECAST_DAYS,
) -> Forecast | None:
    if len(points) < min_days:
        return None
    fit = linear_fit(points)
    if fit is None:
        return None
    slope, intercept = fit
    result = Forecast(name, unit, tuple(points), slope * DAY, intercept, horizon_days, limit)
    if limit is None:
        return result
    now = result.at(end)
    if now >= limit:
        days: float | None = 0.0
    elif slope > 0:
        days = (limit - now) / (slope * DAY)
    else:
        days = None
    return Forecast(name, unit, tuple(points), slope * DAY, intercept, horizon_days, limit, days)
