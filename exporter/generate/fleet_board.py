"""The fleet-overview dashboard: every chip of the chosen nodes at a glance."""

from __future__ import annotations

from exporter.core import faultlevels
from exporter.generate.board import Board, node_vars
from exporter.generate.chip_rules import isolated_pages, missing_chips, missing_lookback
from exporter.generate.common import pct
from exporter.generate.health_panels import health_history
from exporter.generate.panels import (
    ANY_RED,
    CHIP_LEGEND,
    SEL,
    UTIL,
    Panel,
    graph,
    grid,
    heat,
    history,
    indicator_steps,
    limit_steps,
    q,
    single,
)
from exporter.thresholds.alert_facts import page_isolation
from exporter.thresholds.table import Thresholds, num

# A chip in use: what NPULowUtilization and the tables of chips below target join on.
IN_USE = "and on (job, instance, npu, chip, device) chip:npu_in_use:bool == 1"


def fleet(table_: Thresholds) -> Board:
    return (
        Board(
            "fleet-overview",
            "Every NPU chip of the selected nodes: utilization, chips below target, health and fault levels, missing chips.",
            variables=node_vars(),
        )
        .row("Fleet", *_counts(table_))
        .row("Utilization", *_utilization(table_))
        .row("Problems", *_below_target(table_), *_faults(table_))
    )


def _bound(table_: Thresholds) -> float:
    """NPULowUtilization's bound (without the alert, the indicator's abnormal bound)."""
    low = table_.find("NPULowUtilization")
    return low.threshold if low and low.threshold is not None else table_["device_utilization"].abnormal or 0.6


def _missing(table_: Thresholds) -> tuple[str, str]:
    """The chips each node misses (NPUMissing's expression) and the lookback it falls back on."""
    lookback = missing_lookback(table_.find("NPUMissing"))
    return missing_chips(lookback, SEL), lookback


def _counts(table_: Thresholds) -> list[Panel]:
    util, bound = table_["device_utilization"], _bound(table_)
    missing, lookback = _missing(table_)
    return [
        single("Chips", q(f"count(npu_up{{{SEL}}})"), decimals=0, description="Chips the exporters report."),
        single(
            "Chips in use",
            q(f"sum(chip:npu_in_use:bool{{{SEL}}})"),
            decimals=0,
            description="Chips with a process, a pod or a training job on them.",
        ),
        single(
            f"In use below {pct(bound)}",
            q(f"sum(instance:npu_chips_low_utilization:sum{{{SEL}}})"),
            decimals=0,
            steps=ANY_RED,
            description=f"Chips in use whose 5m AI Core utilization is below {pct(bound)} (NPULowUtilization's bound).",
        ),
        single(
            "Mean utilization",
            q(f"avg(chip:{UTIL}:avg5m{{{SEL}}})"),
            unit="percentunit",
            steps=indicator_steps(util),
            lo=0,
            hi=1,
            description=f"Mean 5m AI Core utilization of the selected chips (healthy: {util.healthy_text()}).",
        ),
        single(
            "Chips not OK",
            q(f'count(npu_health{{{SEL}, state!="OK"}} == 1) or vector(0)'),
            decimals=0,
            steps=ANY_RED,
            description="Chips whose npu-smi Health is not OK.",
        ),
        single(
            "Missing chips",
            q(f"sum(clamp_min(\n{missing}\n, 0)) or vector(0)"),
            decimals=0,
            steps=ANY_RED,
            description=(
                f"Chips the nodes should have but do not list now: npu_expected_devices (config, else PCI), "
                f"or the most they listed within {lookback} where there is no expectation (NPUMissing)."
            ),
        ),
    ]


def _utilization(table_: Thresholds) -> list[Panel]:
    util = table_["device_utilization"]
    steps = indicator_steps(util)
    return [
        heat(
            "Utilization heatmap (chips by AI Core busy share)",
            q(f"{UTIL}{{{SEL}}}", CHIP_LEGEND),
            unit="percentunit",
            description="How many chips sit at each utilization level over time.",
        ),
        graph(
            "Utilization by node",
            q(f"instance:{UTIL}:avg5m{{{SEL}}}", "{{instance}}"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description=f"Mean 5m utilization per node; lines at {pct(util.abnormal or 0)} and {pct(util.healthy or 0)}.",
        ),
        history(
            "Per-chip utilization",
            q(f"chip:{UTIL}:avg5m{{{SEL}}}", CHIP_LEGEND),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description="Every chip's 5m AI Core utilization; red below the abnormal bound, green above the healthy bound.",
        ),
    ]


def _below_target(table_: Thresholds) -> list[Panel]:
    """The chips in use below NPULowUtilization's bound, now and over the last hour."""
    bound, steps = _bound(table_), indicator_steps(table_["device_utilization"])
    now = f"chip:{UTIL}:avg5m{{{SEL}}} < {num(bound)}\n{IN_USE}"
    hour = f"bottomk(10, chip:{UTIL}:avg1h{{{SEL}}}\n  {IN_USE})"
    return [
        grid(
            f"Chips in use below {pct(bound)}",
            q(now, table_format=True),
            unit="percentunit",
            steps=steps,
            hidden=("__name__",),
            sort="Value",
            description="The chips NPULowUtilization is about (before its `for:` window).",
        ),
        grid(
            "Top offenders (lowest 1h utilization, chips in use)",
            q(hour, table_format=True),
            unit="percentunit",
            steps=steps,
            hidden=("__name__",),
            sort="Value",
        ),
    ]


def _faults(table_: Thresholds) -> list[Panel]:
    """Health, missing chips, fault levels and isolated memory pages."""
    missing, lookback = _missing(table_)
    pages = page_isolation(table_)
    levels = ", ".join(faultlevels.NAMES)
    return [
        health_history("Health matrix", SEL, description="npu-smi Health of every chip over time (npu_health)."),
        graph(
            "Missing chips by node",
            q(f"clamp_min(\n{missing}\n, 0)", "{{instance}}"),
            decimals=0,
            steps=ANY_RED,
            lo=0,
            description=(
                f"Expected chips (npu_expected_devices; without one, the most listed within {lookback}) "
                f"minus chips listed now (NPUMissing fires above 0)."
            ),
        ),
        graph(
            "Chips up by node",
            q(f"sum by (instance) (npu_up{{{SEL}}})", "{{instance}}"),
            lo=0,
            decimals=0,
            description="Chips whose latest npu-smi read succeeded.",
        ),
        graph(
            "Chips by fault level",
            q(f"count by (level) (npu_fault_level{{{SEL}}} == 1)", "{{level}}"),
            decimals=0,
            lo=0,
            stack=True,
            bars=True,
            description=(
                "Chips by the most severe handling level of their fault codes (npu_fault_level; the fault-code table's "
                f"levels, most severe first: {levels}). {' and '.join(faultlevels.ISOLATION)} page "
                "NPUNeedsIsolation; docs/runbooks.md, Fault levels, says what each asks."
            ),
        ),
        grid(
            "Chips with a fault level",
            q(f'npu_fault_level{{{SEL}, level!="none"}} == 1', table_format=True),
            hidden=("__name__", "job", "Value"),
            sort="level",
            description="Every chip whose fault codes have a handling level, with the level (the action: docs/runbooks.md, Fault levels).",
        ),
        grid(
            "Chips with isolated memory pages",
            q(f"{isolated_pages(SEL)} > 0", table_format=True),
            steps=limit_steps(pages.limit if pages else None),
            hidden=("__name__", "job"),
            sort="Value",
            w=24,
            h=6,
            description=(pages.text if pages else "Pages the driver took out of use after ECC errors.")
            + " Every chip that has lost any; a growing list is failing HBM.",
        ),
    ]
