"""The node-chip-detail dashboard: one node's chips, with the interconnect and network rows."""

from __future__ import annotations

from exporter.generate.board import Board, node_vars
from exporter.generate.common import pct, positive
from exporter.generate.health_panels import fault_level_history, health_history
from exporter.generate.interconnect_row import interconnect_panels
from exporter.generate.network_row import network_panels
from exporter.generate.panels import (
    CHIP_LEGEND,
    CHIP_SEL,
    RATIO,
    SEL,
    UTIL,
    Panel,
    graph,
    grid,
    indicator_steps,
    info_grid,
    limit_steps,
    q,
    threshold,
)
from exporter.thresholds.alert_facts import page_isolation
from exporter.thresholds.table import Thresholds, num


def node(table_: Thresholds) -> Board:
    return (
        Board(
            "node-chip-detail",
            "One node and its chips: utilization of every engine, memory, power, temperature, ECC, network, processes and pods.",
            time_from="now-3h",
            variables=node_vars(device=True),
        )
        .row("Utilization", *_utilization(table_))
        .row("Memory", *_memory(table_))
        .row("Power and thermals", *_power(table_))
        .row("Health and interconnect", *interconnect_panels(table_))
        .row("Network", *network_panels(table_))
        .row("Health, processes and pods", *_health_and_processes())
    )


def _chips(metric: str) -> str:
    return f"{metric}{{{CHIP_SEL}}}"


def _utilization(table_: Thresholds) -> list[Panel]:
    util = table_["device_utilization"]
    steps = indicator_steps(util)
    engines = (("aivector", "vector"), ("aicube", "cube"), ("aicpu", "aicpu"), ("ctrlcpu", "ctrlcpu"))
    return [
        graph(
            "AI Core utilization",
            q(_chips(UTIL), CHIP_LEGEND),
            **RATIO,
            steps=steps,
            description=f"Device utilization (npu-smi AICore %); healthy {util.healthy_text()}, abnormal {util.abnormal_text()}.",
        ),
        graph(
            "AI Core utilization, 5m mean and spread",
            q(_chips(f"chip:{UTIL}:avg5m"), "mean {{device}}"),
            q(f"stddev_over_time({_chips(UTIL)}[10m])", "stddev {{device}}"),
            **RATIO,
            steps=steps,
            description="A high spread around a mediocre mean is the saw-tooth of NPUUtilizationUnstable.",
        ),
        graph(
            "Vector / Cube / AI CPU / control CPU",
            *[q(_chips(f"npu_{engine}_utilization_ratio"), f"{name} {{{{device}}}}") for engine, name in engines],
            **RATIO,
        ),
        graph("NPU utilization (npu-smi)", q(_chips("npu_utilization_ratio"), CHIP_LEGEND), **RATIO),
    ]


def _memory(table_: Thresholds) -> list[Panel]:
    hbm = threshold(table_.find("NPUHBMAlmostFull"))
    return [
        graph(
            "HBM used / total",
            q(f"{_chips('npu_hbm_used_bytes')} / {positive(_chips('npu_hbm_total_bytes'))}", CHIP_LEGEND),
            **RATIO,
            steps=limit_steps(hbm),
            description=f"NPUHBMAlmostFull fires above {pct(hbm or 0)}.",
        ),
        graph(
            "HBM used",
            q(_chips("npu_hbm_used_bytes"), CHIP_LEGEND),
            q(f"max({_chips('npu_hbm_total_bytes')})", "capacity"),
            unit="bytes",
            lo=0,
        ),
        graph(
            "HBM / DDR bandwidth",
            q(_chips("npu_hbm_bandwidth_utilization_ratio"), "HBM {{device}}"),
            q(_chips("npu_ddr_bandwidth_utilization_ratio"), "DDR {{device}}"),
            **RATIO,
        ),
        graph(
            "DDR memory and huge pages",
            q(f"{_chips('npu_memory_used_bytes')} / {positive(_chips('npu_memory_total_bytes'))}", "DDR {{device}}"),
            q(f"{_chips('npu_hugepages_used_pages')} / {positive(_chips('npu_hugepages_total_pages'))}", "huge pages {{device}}"),
            **RATIO,
        ),
    ]


def _power(table_: Thresholds) -> list[Panel]:
    temp = threshold(table_.find("NPUTemperatureHigh"))
    pages = page_isolation(table_)
    return [
        graph("Power", q(_chips("npu_power_watts"), CHIP_LEGEND), unit="watt", lo=0, w=8),
        graph(
            "Temperature",
            q(_chips("npu_temperature_celsius"), "chip {{device}}"),
            q(_chips("npu_hbm_temperature_celsius"), "HBM {{device}}"),
            unit="celsius",
            steps=limit_steps(temp),
            w=8,
            description=f"NPUTemperatureHigh fires above {num(temp or 0)} °C.",
        ),
        graph(
            "AI Core clock vs rated",
            q(_chips("npu_aicore_frequency_hertz"), "current {{device}}"),
            q(_chips("npu_aicore_rated_frequency_hertz"), "rated {{device}}"),
            unit="hertz",
            w=8,
        ),
        graph(
            "ECC errors (increase over 1h)",
            q(f"increase({_chips('npu_ecc_errors_total')}[1h])", "{{device}} {{memory}} {{type}}"),
            lo=0,
            h=6,
            description="Double-bit (uncorrectable) errors fire NPUECCDoubleBitErrors.",
        ),
        graph(
            "ECC isolated pages",
            q(_chips("npu_ecc_isolated_pages"), "{{device}} {{memory}} {{type}}"),
            lo=0,
            h=6,
            steps=limit_steps(pages.limit if pages else None),
            description=pages.text if pages else "Pages the driver took out of use after ECC errors.",
        ),
    ]


def _health_and_processes() -> list[Panel]:
    return [
        health_history("Health", CHIP_SEL, h=6),
        fault_level_history(CHIP_SEL),
        info_grid(
            "Health error codes",
            _chips("npu_health_error_info"),
            description="npu-smi `-t health` error codes of the chips that are not OK (and Ascend 950 fault event ids), each with "
            "its handling level in the fault-code table (docs/runbooks.md, Fault levels).",
        ),
        grid("Processes", q(_chips("npu_process_memory_bytes"), table_format=True), unit="bytes", hidden=("__name__", "job")),
        info_grid("Pods (kubelet)", _chips("npu_pod_info")),
        info_grid(
            "Owners",
            f"group by (job, instance, npu, chip, device, runtime, owner) ({_chips('npu_chip_owner_info')})\n"
            f"or on (job, instance, npu, chip)\ngroup by (job, instance, npu, chip, device) ({_chips('npu_up')})",
            description="Who holds each chip (npu_chip_owner_info, from the cgroups of the processes npu-smi shows): "
            "a pod, a Docker, containerd or Podman container, a Slurm job and its user, a systemd unit, or the host. "
            "A chip with no owner known has the owner column empty.",
        ),
        info_grid("Chips", _chips("npu_device_info")),
        info_grid(
            "Driver",
            f"npu_driver_info{{{SEL}}}\nand on (job, instance) {_chips('npu_up')}",
            description="The driver of the nodes of the chosen chips.",
        ),
    ]
