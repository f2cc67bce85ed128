"""The node-chip-detail dashboard: one node's chips, with the network row."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import pct
from exporter.generate.fault_panels import fault_level_history
from exporter.generate.interconnect_row import interconnect_row
from exporter.generate.network_row import network_row
from exporter.generate.panels import (
    CHIP_LEGEND,
    CHIP_SEL,
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
    history,
    indicator_steps,
    limit_steps,
    node_vars,
    q,
)
from exporter.thresholds.alert_facts import page_isolation
from exporter.thresholds.table import Thresholds, num


def node(table_: Thresholds) -> Board:
    util = table_["device_utilization"]
    steps = indicator_steps(util)
    temp = spec.threshold if (spec := table_.find("NPUTemperatureHigh")) else None
    hbm = spec.threshold if (spec := table_.find("NPUHBMAlmostFull")) else None
    pages = page_isolation(table_)
    b = Board(
        "node-chip-detail",
        "One node and its chips: utilization of every engine, memory, power, temperature, ECC, network, processes and pods.",
        time_from="now-3h",
        variables=node_vars(device=True),
    )
    b.row("Utilization")
    b.add(
        graph(
            "AI Core utilization",
            q(f"{UTIL}{{{CHIP_SEL}}}", CHIP_LEGEND),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description=f"Device utilization (npu-smi AICore %); healthy {util.healthy_text()}, abnormal {util.abnormal_text()}.",
        ),
        graph(
            "AI Core utilization, 5m mean and spread",
            q(f"chip:{UTIL}:avg5m{{{CHIP_SEL}}}", "mean {{device}}"),
            q(f"stddev_over_time({UTIL}{{{CHIP_SEL}}}[10m])", "stddev {{device}}"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description="A high spread around a mediocre mean is the saw-tooth of NPUUtilizationUnstable.",
        ),
        graph(
            "Vector / Cube / AI CPU / control CPU",
            q(f"npu_aivector_utilization_ratio{{{CHIP_SEL}}}", "vector {{device}}"),
            q(f"npu_aicube_utilization_ratio{{{CHIP_SEL}}}", "cube {{device}}"),
            q(f"npu_aicpu_utilization_ratio{{{CHIP_SEL}}}", "aicpu {{device}}"),
            q(f"npu_ctrlcpu_utilization_ratio{{{CHIP_SEL}}}", "ctrlcpu {{device}}"),
            unit="percentunit",
            lo=0,
            hi=1,
        ),
        graph("NPU utilization (npu-smi)", q(f"npu_utilization_ratio{{{CHIP_SEL}}}", CHIP_LEGEND), unit="percentunit", lo=0, hi=1),
    )
    b.row("Memory")
    b.add(
        graph(
            "HBM used / total",
            q(f"npu_hbm_used_bytes{{{CHIP_SEL}}} / npu_hbm_total_bytes{{{CHIP_SEL}}}", CHIP_LEGEND),
            unit="percentunit",
            steps=limit_steps(hbm),
            lo=0,
            hi=1,
            description=f"NPUHBMAlmostFull fires above {pct(hbm or 0)}.",
        ),
        graph(
            "HBM used",
            q(f"npu_hbm_used_bytes{{{CHIP_SEL}}}", CHIP_LEGEND),
            q(f"max(npu_hbm_total_bytes{{{CHIP_SEL}}})", "capacity"),
            unit="bytes",
            lo=0,
        ),
        graph(
            "HBM / DDR bandwidth",
            q(f"npu_hbm_bandwidth_utilization_ratio{{{CHIP_SEL}}}", "HBM {{device}}"),
            q(f"npu_ddr_bandwidth_utilization_ratio{{{CHIP_SEL}}}", "DDR {{device}}"),
            unit="percentunit",
            lo=0,
            hi=1,
        ),
        graph(
            "DDR memory and huge pages",
            q(f"npu_memory_used_bytes{{{CHIP_SEL}}} / npu_memory_total_bytes{{{CHIP_SEL}}}", "DDR {{device}}"),
            q(f"npu_hugepages_used_pages{{{CHIP_SEL}}} / npu_hugepages_total_pages{{{CHIP_SEL}}}", "huge pages {{device}}"),
            unit="percentunit",
            lo=0,
            hi=1,
        ),
    )
    b.row("Power and thermals")
    b.add(
        graph("Power", q(f"npu_power_watts{{{CHIP_SEL}}}", CHIP_LEGEND), unit="watt", lo=0, w=8),
        graph(
            "Temperature",
            q(f"npu_temperature_celsius{{{CHIP_SEL}}}", "chip {{device}}"),
            q(f"npu_hbm_temperature_celsius{{{CHIP_SEL}}}", "HBM {{device}}"),
            unit="celsius",
            steps=limit_steps(temp),
            w=8,
            description=f"NPUTemperatureHigh fires above {num(temp or 0)} °C.",
        ),
        graph(
            "AI Core clock vs rated",
            q(f"npu_aicore_frequency_hertz{{{CHIP_SEL}}}", "current {{device}}"),
            q(f"npu_aicore_rated_frequency_hertz{{{CHIP_SEL}}}", "rated {{device}}"),
            unit="hertz",
            w=8,
        ),
        graph(
            "ECC errors (increase over 1h)",
            q(f"increase(npu_ecc_errors_total{{{CHIP_SEL}}}[1h])", "{{device}} {{memory}} {{type}}"),
            unit="short",
            lo=0,
            h=6,
            description="Double-bit (uncorrectable) errors fire NPUECCDoubleBitErrors.",
        ),
        graph(
            "ECC isolated pages",
            q(f"npu_ecc_isolated_pages{{{CHIP_SEL}}}", "{{device}} {{memory}} {{type}}"),
            unit="short",
            lo=0,
            h=6,
            steps=limit_steps(pages.limit if pages else None),
            description=pages.text if pages else "Pages the driver took out of use after ECC errors.",
        ),
    )
    interconnect_row(b, table_)
    network_row(b, table_)
    b.row("Health, processes and pods")
    b.add(
        history(
            "Health",
            q(f"max by (instance, device) ({HEALTH_CODE.replace(SEL, CHIP_SEL)})", CHIP_LEGEND),
            mappings=HEALTH_MAPPINGS,
            h=6,
            steps=[
                dm.Threshold(value=None, color=GREEN),
                dm.Threshold(value=1, color="yellow"),
                dm.Threshold(value=2, color=ORANGE),
                dm.Threshold(value=3, color=RED),
                dm.Threshold(value=4, color="purple"),
            ],
        ),
        fault_level_history(CHIP_SEL),
        grid(
            "Health error codes",
            q(f"npu_health_error_info{{{CHIP_SEL}}}", table_format=True),
            hidden=("__name__", "job", "Value"),
            description="npu-smi `-t health` error codes of the chips that are not OK (and Ascend 950 fault event ids), each with "
            "its handling level in the fault-code table (docs/runbooks.md, Fault levels).",
        ),
        grid("Processes", q(f"npu_process_memory_bytes{{{CHIP_SEL}}}", table_format=True), unit="bytes", hidden=("__name__", "job")),
        grid("Pods (kubelet)", q(f"npu_pod_info{{{CHIP_SEL}}}", table_format=True), hidden=("__name__", "job", "Value")),
        grid("Chips", q(f"npu_device_info{{{CHIP_SEL}}}", table_format=True), hidden=("__name__", "job", "Value")),
        grid(
            "Driver",
            q(f"npu_driver_info{{{SEL}}}\nand on (job, instance) npu_up{{{CHIP_SEL}}}", table_format=True),
            hidden=("__name__", "job", "Value"),
            description="The driver of the nodes of the chosen chips.",
        ),
    )
    return b
