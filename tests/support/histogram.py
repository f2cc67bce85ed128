"""histogram_quantile as Prometheus computes it (promql/quantile.go, bucketQuantile): linear
interpolation inside the bucket the rank falls in, the first bucket starting at 0, the
highest finite bound when the rank lands in +Inf. For checking served buckets without a
Prometheus server."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float:
    """``bounds`` ascending, the last +Inf; ``cumulative`` the bucket counts per bound."""
    total = cumulative[-1]
    if total == 0 or len(bounds) < 2:
        return math.nan
    rank = q * total
    b = bisect.bisect_left(cumulative, rank)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start = 0.0 if b == 0 else bounds[b - 1]
    below = 0.0 if b == 0 else cumulative[b - 1]
    return start + (bounds[b] - start) * (rank - below) / (cumulative[b] - below)
