"""The capacity dashboard: chip-hours, allocation and forecasts from the cluster:* records."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.board import Board, datasource_var
from exporter.generate.common import pct
from exporter.generate.panels import RATIO, Panel, bars, graph, graphs, grid, indicator_steps, q
from exporter.thresholds.records import MIN_FORECAST_DAYS
from exporter.thresholds.table import Thresholds, num


def capacity(table_: Thresholds) -> Board:
    return (
        Board(
            "capacity-planning",
            "Utilization trends, distribution, idle capacity, allocation versus use and a 30-day forecast, "
            "from the recording rules (alerts/cann-exporter.rules.yml).",
            time_from="now-30d",
            refresh="15m",
            variables=[datasource_var(), price_var()],
        )
        .row("Trends", *_trends(table_))
        .row("Distribution and idle capacity", *_distribution(table_))
        .row("Allocation versus use", *_allocation(table_))
        .row("Energy and efficiency", *_energy())
        .row("Forecast", *_forecasts(table_))
    )


def _trends(table_: Thresholds) -> list[Panel]:
    steps = indicator_steps(table_["device_utilization"])
    quantile = "cluster:npu_aicore_utilization_ratio:quantile_avg1h"
    return [
        graph(
            "Cluster utilization (1h and daily means)",
            q("cluster:npu_aicore_utilization_ratio:avg1h", "1h mean (chips)"),
            q("cluster:npu_aicore_utilization_ratio:avg1d", "daily mean"),
            q("cluster:npu_aicore_utilization_ratio_in_use:avg5m", "chips in use, 5m"),
            **RATIO,
            steps=steps,
        ),
        graph(
            "Utilization quantiles across chips (1h)",
            *[q(f'{quantile}{{quantile="{num(v)}"}}', f"p{num(v * 100)}") for v in table_.recording.quantiles],
            **RATIO,
            steps=steps,
        ),
        graph("Utilization by node (daily)", q("instance:npu_aicore_utilization_ratio:avg1d", "{{instance}}"), **RATIO, steps=steps),
        graph(
            "Utilization by namespace (1h)",
            q("namespace:npu_aicore_utilization_ratio:avg1h", "{{namespace}}"),
            **RATIO,
            steps=steps,
            description="Chips attributed to namespaces by the kubelet (npu_pod_info).",
        ),
    ]


def _distribution(table_: Thresholds) -> list[Panel]:
    util = table_["device_utilization"]
    abnormal, healthy = util.abnormal or 0.6, util.healthy or 0.85
    return [
        bars(
            "Chips by daily utilization",
            *[
                q(
                    f"count(chip:npu_aicore_utilization_ratio:avg1d >= {num(lo)} < {num(hi)}) or vector(0)",
                    f"{pct(lo)}-{pct(hi)}",
                    instant=True,
                )
                for lo, hi in ((0, abnormal), (abnormal, healthy), (healthy, 1.01))
            ],
            decimals=0,
            description="Chips below the abnormal bound, in between, and healthy, by their daily mean.",
        ),
        graph(
            "Idle and unused chip-hours per day",
            q("cluster:npu_chip_hours:sum1d", "observed"),
            q("cluster:npu_idle_chip_hours:sum1d", "idle (nothing on the chip)"),
            q("cluster:npu_unused_chip_hours:sum1d", "unused (AI Cores not busy)"),
            lo=0,
            description="Chip-hours of the last day, observed time only (a new chip or a scrape gap adds only the "
            "minutes it was scraped): idle = no process, pod or job; unused = (1 - utilization) x observed hours.",
        ),
        grid(
            "Unused chip-hours per namespace (last day)",
            q("namespace:npu_unused_chip_hours:sum1d", table_format=True),
            hidden=("__name__",),
            sort="Value",
        ),
        grid(
            "Idle chip-hours per node (last day)",
            q("instance:npu_idle_chip_hours:sum1d", table_format=True),
            hidden=("__name__",),
            sort="Value",
        ),
    ]


def _allocation(table_: Thresholds) -> list[Panel]:
    return [
        graph(
            "Chips: total, in use, below target",
            q("cluster:npu_chips:count", "total"),
            q("cluster:npu_chips_in_use:sum", "in use"),
            q("cluster:npu_chips_low_utilization:sum", "in use, below target"),
            q("sum(namespace:npu_chips:count)", "allocated to pods"),
            lo=0,
            decimals=0,
        ),
        graph(
            "Allocation and use",
            q("cluster:npu_allocation:ratio", "allocated (in use / total)"),
            q("cluster:npu_aicore_utilization_ratio_in_use:avg5m", "use of allocated chips"),
            q("cluster:npu_aicore_utilization_ratio:avg5m", "use of all chips"),
            **RATIO,
            steps=indicator_steps(table_["device_utilization"]),
        ),
        graph("HBM headroom", q("cluster:npu_hbm_headroom_bytes:sum", "free HBM (cluster)"), unit="bytes", lo=0, w=8),
        graph(
            "Peak HBM use (daily)",
            q("cluster:npu_hbm_usage:max1d", "busiest chip"),
            q("instance:npu_hbm_usage:max1d", "{{instance}}"),
            **RATIO,
            w=8,
        ),
        graph("Chips in use (daily mean)", q("cluster:npu_chips_in_use:avg1d", "in use"), lo=0, w=8),
    ]


def _forecasts(table_: Thresholds) -> list[Panel]:
    history = f"Empty until the record has {MIN_FORECAST_DAYS} days of history."
    return [
        graph(
            "Chips in use: 7-day trend projected 30 days",
            q("cluster:npu_chips_in_use:sum", "now"),
            q(forecast("cluster:npu_chips_in_use:sum", "0", f"scalar({CHIPS})"), "in 30 days"),
            q(CHIPS, "capacity"),
            lo=0,
            decimals=0,
            description=(
                f"predict_linear over the last 7 days, between 0 and the chips there are: reaching capacity means plan more chips. {history}"
            ),
        ),
        graph(
            "Utilization: 7-day trend projected 30 days",
            q("cluster:npu_aicore_utilization_ratio:avg1h", "now"),
            q(forecast("cluster:npu_aicore_utilization_ratio:avg1h", "0", "1"), "in 30 days"),
            **RATIO,
            steps=indicator_steps(table_["device_utilization"]),
            description=f"predict_linear over the last 7 days, between 0 and 100%. {history}",
        ),
    ]


def price_var() -> db.TextBoxVariable:
    """The price of a kWh the cost panels multiply by (0: no cost shown)."""
    price = "0.15"
    variable = db.TextBoxVariable("price_per_kwh")
    variable.label("Price per kWh").description("Your electricity price per kWh, in your currency: the energy panels show cost with it.")
    variable.default_value(price).current(dm.VariableOption(text=price, value=price))
    return variable


# Energy over the last hour: title, (expression, legend) of each line, description.
ENERGY = (
    (
        "Energy per node (kWh per hour)",
        (("instance:npu_energy_kwh:sum1h", "{{instance}}"), ("cluster:npu_energy_idle_kwh:sum1h", "cluster: idle or below target")),
        "npu_energy_joules_total over the last hour per node; idle: chips not in use or in use below the target.",
    ),
    (
        "Energy per namespace and job (kWh per hour)",
        (("namespace:npu_energy_kwh:sum1h", "{{namespace}}"), ("job_name:npu_energy_kwh:sum1h", "job {{job_name}}")),
        "",
    ),
    (
        "Energy cost per hour (at $price_per_kwh per kWh)",
        (
            ("cluster:npu_energy_kwh:sum1h * $price_per_kwh", "all chips"),
            ("cluster:npu_energy_idle_kwh:sum1h * $price_per_kwh", "idle or below target"),
        ),
        "",
    ),
)


def _energy() -> list[Panel]:
    """kWh per node, namespace and job, idle energy, cost at $price_per_kwh, and MFU by namespace."""
    mfu = graph(
        "Model FLOPs utilization by namespace",
        q("namespace:npu_job_model_flops_utilization_ratio:avg", "{{namespace}}"),
        **RATIO,
        w=24,
        description="Mean MFU of the ranks on each namespace's chips (jobs that declare flops_per_step, on chips with a peak). "
        "Large-model training commonly reaches 35-60% (PaLM 540B: 46.2%, Chowdhery et al. 2022, arXiv:2204.02311).",
    )
    return [*graphs(ENERGY, lo=0, w=8), mfu]


CHIPS = "cluster:npu_chips:count"
FORECAST_RANGE_DAYS, FORECAST_AHEAD_DAYS = 7, 30


def forecast(record: str, low: str, high: str) -> str:
    """``record`` projected 30 days ahead from its last 7, clamped to [low, high] (the physical
    bounds), and only where ``record`` has MIN_FORECAST_DAYS of history: a sample MIN_FORECAST_DAYS
    or more ago inside the range (a line through hours of data swings to absurd values)."""
    older = FORECAST_RANGE_DAYS - MIN_FORECAST_DAYS
    return (
        f"clamp(predict_linear({record}[{FORECAST_RANGE_DAYS}d], {FORECAST_AHEAD_DAYS} * 86400), {low}, {high})\n"
        f"and on () present_over_time({record}[{older}d] offset {MIN_FORECAST_DAYS}d)"
    )
