"""What some alerts' params mean, for every reader of the table: the rules that page on them,
the dashboards that draw their bounds and `diagnose`, which applies the same limits."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.thresholds.table import AlertSpec, GenerateError, Thresholds, duration_seconds, num

# Optical power params (watts) of NPUOpticalPowerOutOfRange: (direction, metric, low param, high param).
OPTICAL_POWER = (
    ("rx", "npu_optical_rx_power_watts", "rx_power_low", "rx_power_high"),
    ("tx", "npu_optical_tx_power_watts", "tx_power_low", "tx_power_high"),
)
PROFILE_UPDATED = "npu_profile_last_update_timestamp_seconds"


def optical_power_limits(spec: AlertSpec) -> dict[str, tuple[float, float]]:
    """{direction: (low, high)} in watts, from the alert's params."""
    out = {}
    for direction, _, low_key, high_key in OPTICAL_POWER:
        low, high = spec.param(low_key), spec.param(high_key)
        if not isinstance(low, float) or not isinstance(high, float) or not 0 < low < high:
            raise GenerateError(
                f"{spec.alert}: params.{low_key} and params.{high_key}: expected watts with 0 < low < high, got {low!r} and {high!r}"
            )
        out[direction] = (low, high)
    return out


def isolated_pages_limit(spec: AlertSpec) -> float:
    """NPUMemoryPagesIsolated's critical page count."""
    limit = spec.param("critical_pages", 64.0)
    if not isinstance(limit, float) or limit < 0:
        raise GenerateError(f"{spec.alert}: params.critical_pages: expected a number of pages >= 0, got {limit!r}")
    return limit


@dataclass(frozen=True)
class Isolation:
    limit: float
    text: str


def page_isolation(table_: Thresholds) -> Isolation | None:
    """NPUMemoryPagesIsolated's critical page count and what its tiers mean, for panel descriptions."""
    spec = table_.find("NPUMemoryPagesIsolated")
    if spec is None:
        return None
    limit = isolated_pages_limit(spec)
    return Isolation(
        limit,
        (
            f"Pages the driver took out of use after ECC errors (all memories and types). "
            f"NPUMemoryPagesIsolated warns on any new page within {spec.range} and is critical on a "
            f"page after a double-bit error or above {num(limit)} pages."
        ),
    )


def profile_stale(max_age: str, updated: str = PROFILE_UPDATED) -> str:
    """The freshness rule of the profile alerts: the job/ranks whose latest profile (``updated``,
    its timestamp) is older than ``max_age``, valued at its age. `diagnose` applies the same."""
    return f"time() - {updated} > {num(duration_seconds(max_age))}"
