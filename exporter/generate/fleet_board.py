"""The fleet-overview dashboard: every chip of the chosen nodes at a glance."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.core import faultlevels
from exporter.generate.chip_rules import (
    isolated_pages,
    missing_chips,
    missing_lookback,
)
from exporter.generate.common import pct
from exporter.generate.panels import (
    CHIP_LEGEND,
    GREEN,
    HEALTH_CODE,
    HEALTH_MAPPINGS,
    ORANGE,
    RED,
    SEL,
    UTIL,
    Board,
    graph,
    grid,
    heat,
    history,
    indicator_steps,
    limit_steps,
    node_vars,
    q,
    single,
)
from exporter.thresholds.alert_facts import page_isolation
from exporter.thresholds.table import Thresholds, num


def fleet(table_: Thresholds) -> Board:
    util = table_["device_utilization"]
    low = table_.find("NPULowUtilization")
    bound = low.threshold if low and low.threshold is not None else util.abnormal or 0.6
    steps = indicator_steps(util)
    pages = page_isolation(table_)
    lookback = missing_lookback(table_.find("NPUMissing"))
    missing = missing_chips(lookback, SEL)
    b = Board(
        "fleet-overview",
        "Every NPU chip of the selected nodes: utilization, chips below target, health and fault levels, missing chips.",
        variables=node_vars(),
    )
    b.row("Fleet")
    b.add(
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
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
            description=f"Chips in use whose 5m AI Core utilization is below {pct(bound)} (NPULowUtilization's bound).",
        ),
        single(
            "Mean utilization",
            q(f"avg(chip:{UTIL}:avg5m{{{SEL}}})"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description=f"Mean 5m AI Core utilization of the selected chips (healthy: {util.healthy_text()}).",
        ),
        single(
            "Chips not OK",
            q(f'count(npu_health{{{SEL}, state!="OK"}} == 1) or vector(0)'),
            decimals=0,
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
            description="Chips whose npu-smi Health is not OK.",
        ),
        single(
            "Missing chips",
            q(f"sum(clamp_min(\n{missing}\n, 0)) or vector(0)"),
            decimals=0,
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
            description=(
                f"Chips the nodes should have but do not list now: npu_expected_devices (config, else PCI), "
                f"or the most they listed within {lookback} where there is no expectation (NPUMissing)."
            ),
        ),
    )
    b.row("Utilization")
    b.add(
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
    )
    b.row("Problems")
    b.add(
        grid(
            f"Chips in use below {pct(bound)}",
            q(
                f"chip:{UTIL}:avg5m{{{SEL}}} < {num(bound)}\nand on (job, instance, npu, chip, device) chip:npu_in_use:bool == 1",
                table_format=True,
            ),
            unit="percentunit",
            steps=steps,
            hidden=("__name__",),
            sort="Value",
            description="The chips NPULowUtilization is about (before its `for:` window).",
        ),
        grid(
            "Top offenders (lowest 1h utilization, chips in use)",
            q(
                f"bottomk(10, chip:{UTIL}:avg1h{{{SEL}}}\n  and on (job, instance, npu, chip, device) chip:npu_in_use:bool == 1)",
                table_format=True,
            ),
            unit="percentunit",
            steps=steps,
            hidden=("__name__",),
            sort="Value",
        ),
        history(
            "Health matrix",
            q(f"max by (instance, device) ({HEALTH_CODE})", CHIP_LEGEND),
            mappings=HEALTH_MAPPINGS,
            steps=[
                dm.Threshold(value=None, color=GREEN),
                dm.Threshold(value=1, color="yellow"),
                dm.Threshold(value=2, color=ORANGE),
                dm.Threshold(value=3, color=RED),
                dm.Threshold(value=4, color="purple"),
            ],
            description="npu-smi Health of every chip over time (npu_health).",
        ),
        graph(
            "Missing chips by node",
            q(f"clamp_min(\n{missing}\n, 0)", "{{instance}}"),
            decimals=0,
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
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
                f"levels, most severe first: {', '.join(faultlevels.NAMES)}). {' and '.join(faultlevels.ISOLATION)} page "
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
    )
    return b
