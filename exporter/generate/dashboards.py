"""Grafana dashboards from the threshold table, built with Grafana's typed builders
(grafana-foundation-sdk) and returned as plain JSON-ready dicts.

Every panel queries the `${datasource}` variable (no datasource uid is hard-coded), carries
a unit, and the panels of an indicator of the health table draw its bounds as threshold
lines/colours. Dashboard uids are fixed (UIDS) so links and bookmarks survive regeneration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import MIN_FORECAST_DAYS, dbm, num, pct
from exporter.generate.exporter_board import exporter_health
from exporter.generate.panels import (
    CHIP_LEGEND,
    CHIP_SEL,
    GREEN,
    HEALTH_CODE,
    HEALTH_MAPPINGS,
    JOB_LEGEND,
    JOB_SEL,
    ORANGE,
    RED,
    SEL,
    UTIL,
    Board,
    bars,
    datasource_var,
    graph,
    grid,
    heat,
    history,
    indicator_steps,
    limit_steps,
    node_vars,
    q,
    query_var,
    single,
)
from exporter.generate.rules import (
    isolated_pages,
    isolated_pages_limit,
    missing_chips,
    missing_lookback,
    optical_power_limits,
)
from exporter.generate.thresholds import Thresholds
from exporter.hccn.records import NET_HEALTH_STATES


# --- the five dashboards -----------------------------------------------------------------------
def fleet(table_: Thresholds) -> Board:
    util = table_["device_utilization"]
    low = table_.alert("NPULowUtilization") if _has(table_, "NPULowUtilization") else None
    bound = low.threshold if low and low.threshold is not None else util.abnormal or 0.6
    steps = indicator_steps(util)
    pages = _isolation(table_)
    lookback = missing_lookback(table_.alert("NPUMissing") if _has(table_, "NPUMissing") else None)
    missing = missing_chips(lookback, SEL)
    b = Board(
        "fleet-overview",
        "Every NPU chip of the selected nodes: utilization, chips below target, health, missing chips.",
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


@dataclass(frozen=True)
class _Isolation:
    limit: float
    text: str


def _isolation(table_: Thresholds) -> _Isolation | None:
    """NPUMemoryPagesIsolated's critical page count and what its tiers mean, for panel descriptions."""
    if not _has(table_, "NPUMemoryPagesIsolated"):
        return None
    spec = table_.alert("NPUMemoryPagesIsolated")
    limit = isolated_pages_limit(spec)
    return _Isolation(
        limit,
        (
            f"Pages the driver took out of use after ECC errors (all memories and types). "
            f"NPUMemoryPagesIsolated warns on any new page within {spec.range} and is critical on a "
            f"page after a double-bit error or above {num(limit)} pages."
        ),
    )


def node(table_: Thresholds) -> Board:
    util = table_["device_utilization"]
    steps = indicator_steps(util)
    temp = table_.alert("NPUTemperatureHigh").threshold if _has(table_, "NPUTemperatureHigh") else None
    hbm = table_.alert("NPUHBMAlmostFull").threshold if _has(table_, "NPUHBMAlmostFull") else None
    pages = _isolation(table_)
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
        grid(
            "Health error codes",
            q(f"npu_health_error_info{{{CHIP_SEL}}}", table_format=True),
            hidden=("__name__", "job", "Value"),
            description="npu-smi `-t health` error codes of the chips that are not OK; look them up for your driver version.",
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


# --- network (hccn_tool) ----------------------------------------------------------------------
PORT_LEGEND = "{{device}} {{port}}"


def net_health_code(sel: str) -> str:
    """The current hccn_tool -net_health state of each port as its index in NET_HEALTH_STATES."""
    return " or ".join(f'{code} * npu_network_health{{{sel}, state="{state}"}}' for code, state in enumerate(NET_HEALTH_STATES))


def band_steps(low: float, high: float) -> list[dm.Threshold]:
    """Red below ``low``, green in between, red above ``high``."""
    return [dm.Threshold(value=None, color=RED), dm.Threshold(value=low, color=GREEN), dm.Threshold(value=high, color=RED)]


def network_row(b: Board, table_: Thresholds) -> None:
    """The "Network" row of the node dashboard: hccn_tool's ports and optical modules, with the
    bounds of the network alerts from the table."""
    spec = {
        name: table_.alert(name) if _has(table_, name) else None
        for name in (
            "NPUNetworkLinkFlapping",
            "NPUNetworkErrors",
            "NPUNetworkPFCStorm",
            "NPUOpticalPowerOutOfRange",
            "NPUOpticalTemperatureHigh",
            "NPUNetworkUnhealthy",
        )
    }
    flap, errors, pfc = spec["NPUNetworkLinkFlapping"], spec["NPUNetworkErrors"], spec["NPUNetworkPFCStorm"]
    power, otemp, health = spec["NPUOpticalPowerOutOfRange"], spec["NPUOpticalTemperatureHigh"], spec["NPUNetworkUnhealthy"]
    flap_range = flap.range if flap and flap.range else "15m"
    ok_states = tuple(health.param("ok_states", ("Success", "Init"))) if health else ("Success", "Init")
    health_map = [
        dm.ValueMap(
            options={
                str(code): dm.ValueMappingResult(text=state, color=GREEN if state in ok_states else RED, index=code)
                for code, state in enumerate(NET_HEALTH_STATES)
            }
        )
    ]
    limits = optical_power_limits(power) if power else {}
    lane = "{{device}} {{port}} lane {{lane}}"

    def optical(direction: str, title: str) -> timeseries.Panel:
        metric = f"npu_optical_{direction}_power_watts"
        low, high = limits.get(direction, (None, None))
        steps = band_steps(round(dbm(low), 2), round(dbm(high), 2)) if low and high else None
        text = f"; NPUOpticalPowerOutOfRange fires outside {dbm(low):.1f} to {dbm(high):+.1f} dBm" if low and high else ""
        return graph(
            title,
            q(f"10 * log10(clamp_min({metric}{{{CHIP_SEL}}} * 1000, 0.0001))", lane),
            unit="dBm",
            steps=steps,
            w=8,
            description=f"Per lane, in dBm (10 log10 of mW; a dark lane is drawn at -40 dBm){text}.",
        )

    b.row("Network")
    b.add(
        history(
            "Links up",
            q(f"npu_network_link_up{{{CHIP_SEL}}}", PORT_LEGEND),
            h=6,
            w=12,
            steps=[dm.Threshold(value=None, color=RED), dm.Threshold(value=1, color=GREEN)],
            mappings=[
                dm.ValueMap(
                    options={
                        "0": dm.ValueMappingResult(text="down", color=RED, index=0),
                        "1": dm.ValueMappingResult(text="up", color=GREEN, index=1),
                    }
                )
            ],
            description="hccn_tool -link of every port; NPUNetworkLinkDown fires when a link stays down.",
        ),
        history(
            "Net health state",
            q(f"max by (instance, device, port) ({net_health_code(CHIP_SEL)})", PORT_LEGEND),
            h=6,
            w=12,
            mappings=health_map,
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
            description=(
                f"hccn_tool -net_health (reachability of the port's detect address); "
                f"NPUNetworkUnhealthy fires on any state but {', '.join(ok_states)}."
            ),
        ),
        graph(
            f"Link flaps ({flap_range})",
            q(
                f"increase(npu_network_link_down_transitions_total{{{CHIP_SEL}}}[{flap_range}])\n"
                f"or increase(npu_network_link_up_transitions_total{{{CHIP_SEL}}}[{flap_range}])",
                PORT_LEGEND,
            ),
            unit="short",
            lo=0,
            w=8,
            steps=limit_steps(flap.threshold if flap else None),
            description=(
                f"Link changes within {flap_range} (down count; up count on drivers without one)"
                + (f"; NPUNetworkLinkFlapping fires at {num(flap.threshold)}." if flap and flap.threshold is not None else ".")
            ),
        ),
        graph(
            "Throughput",
            q(
                f'sum by (instance, device, port) (rate(npu_network_bytes_total{{{CHIP_SEL}, kind="mac", direction="rx"}}[$__rate_interval]))',
                "rx " + PORT_LEGEND,
            ),
            q(
                f'-sum by (instance, device, port) (rate(npu_network_bytes_total{{{CHIP_SEL}, kind="mac", direction="tx"}}[$__rate_interval]))',
                "tx " + PORT_LEGEND,
            ),
            unit="Bps",
            w=8,
            description="Bytes through the port's MAC (hccn_tool -stat counters); transmit drawn below zero.",
        ),
        graph(
            "Bandwidth (hccn_tool -bandwidth)",
            q(f"npu_network_receive_bytes_per_second{{{CHIP_SEL}}}", "rx " + PORT_LEGEND),
            q(f"-npu_network_transmit_bytes_per_second{{{CHIP_SEL}}}", "tx " + PORT_LEGEND),
            unit="Bps",
            w=8,
            description="The driver's own throughput reading (also on ports without byte counters, A5); transmit below zero.",
        ),
        graph(
            "PFC frames/s",
            q(
                f'sum by (instance, device, port) (rate(npu_network_packets_total{{{CHIP_SEL}, kind="pfc"}}[$__rate_interval]))',
                PORT_LEGEND,
            ),
            unit="pps",
            lo=0,
            w=8,
            steps=limit_steps(pfc.threshold if pfc else None, ORANGE),
            description=(
                "PFC pause frames received + sent per port"
                + (
                    f"; NPUNetworkPFCStorm fires above {num(pfc.threshold)}/s for {pfc.window}."
                    if pfc and pfc.threshold is not None
                    else "."
                )
            ),
        ),
        graph(
            "Errors/s by kind",
            q(
                f"sum by (instance, device, port, kind) (rate(npu_network_errors_total{{{CHIP_SEL}}}[$__rate_interval]))",
                "{{device}} {{port}} {{kind}}",
            ),
            unit="pps",
            lo=0,
            w=8,
            steps=limit_steps(errors.threshold if errors else None, ORANGE),
            description=(
                "Bad, dropped, retried or rejected packets (hccn_tool -stat) by kind"
                + (
                    f"; NPUNetworkErrors fires when {', '.join(errors.param('kinds', ()))} together exceed "
                    f"{num(errors.threshold)}/s for {errors.window}."
                    if errors and errors.threshold is not None
                    else "."
                )
            ),
        ),
        graph(
            "Port speed",
            q(f"npu_network_speed_bytes{{{CHIP_SEL}}}", PORT_LEGEND),
            unit="Bps",
            lo=0,
            w=8,
            description="Negotiated speed; absent while the link is down.",
        ),
        optical("rx", "Optical receive power"),
        optical("tx", "Optical transmit power"),
        graph(
            "Optical module temperature",
            q(f"npu_optical_temperature_celsius{{{CHIP_SEL}}}", PORT_LEGEND),
            unit="celsius",
            w=8,
            steps=limit_steps(otemp.threshold if otemp else None),
            description=(
                f"NPUOpticalTemperatureHigh fires above {num(otemp.threshold)} °C for {otemp.window}."
                if otemp and otemp.threshold is not None
                else ""
            ),
        ),
    )


def jobs(table_: Thresholds) -> Board:
    memcpy, framework, idle = table_["memcpy_share"], table_["framework_overhead_share"], table_["idle_share"]
    top3, hot, util = table_["top3_operator_share"], table_["max_operator_share"], table_["device_utilization"]
    reg = table_.alert("NPUIterationTimeRegression") if _has(table_, "NPUIterationTimeRegression") else None
    baseline = reg.param("baseline", "1d") if reg else "1d"
    stall = table_.alert("NPUTrainingStalled").threshold if _has(table_, "NPUTrainingStalled") else None
    rate = "$__rate_interval"
    dur = "npu_job_iteration_duration_seconds"
    variables = [
        datasource_var(),
        query_var("job", "Job", "label_values(npu_devices, job)"),
        query_var(
            "job_name",
            "Training job",
            'label_values({__name__=~"npu_job_info|npu_profile_last_update_timestamp_seconds", job=~"$job"}, job_name)',
        ),
    ]
    b = Board(
        "training-jobs",
        "Training jobs reporting through the hooks (npu_job_*) and their latest profiles (npu_profile_*): "
        "the three levels of the tuning method.",
        time_from="now-6h",
        variables=variables,
    )
    b.row("Macro: iterations and throughput")
    b.add(
        graph(
            "Iteration time",
            q(f"histogram_quantile(0.5, sum by (job_name, rank, le) (rate({dur}_bucket{{{JOB_SEL}}}[{rate}])))", "p50 " + JOB_LEGEND),
            q(f"histogram_quantile(0.99, sum by (job_name, rank, le) (rate({dur}_bucket{{{JOB_SEL}}}[{rate}])))", "p99 " + JOB_LEGEND),
            q(
                f"sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}])) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[{rate}]))",
                "mean " + JOB_LEGEND,
            ),
            unit="s",
            lo=0,
        ),
        graph(
            "Throughput (samples/s)",
            q(f"sum by (job_name) (rate(npu_job_samples_total{{{JOB_SEL}}}[{rate}]))", "{{job_name}}"),
            q(f"sum by (job_name) (rate(npu_job_iterations_total{{{JOB_SEL}}}[{rate}]))", "{{job_name}} iterations/s"),
            unit="short",
            lo=0,
        ),
        graph(
            f"Iteration time vs {baseline} ago",
            q(
                f"(sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[1h])) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[1h])))\n"
                f"/ (sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[1h] offset {baseline})) / sum by (job_name, rank) (rate({dur}_count{{{JOB_SEL}}}[1h] offset {baseline})))\n- 1",
                JOB_LEGEND,
            ),
            unit="percentunit",
            steps=limit_steps(reg.threshold if reg else None),
            description=f"Mean iteration time over 1h relative to the same job {baseline} earlier; NPUIterationTimeRegression fires above "
            f"{pct(reg.threshold if reg and reg.threshold is not None else 0)}.",
        ),
        graph(
            "Time since the last iteration",
            q(f"time() - npu_job_last_iteration_timestamp_seconds{{{JOB_SEL}}}", JOB_LEGEND),
            unit="s",
            steps=limit_steps(stall),
            lo=0,
            description=f"NPUTrainingStalled fires above {num(stall or 0)} s.",
        ),
        graph(
            "Idle gaps between iterations",
            q(f"1 - sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}]))", JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(idle),
            lo=0,
            hi=1,
            description=f"Wall time outside the reported steps (macro level: is the task stream continuous?); healthy {idle.healthy_text()}.",
        ),
        graph(
            "Utilization of the jobs' chips",
            q(
                f'{UTIL}{{job=~"$job"}}\n  * on (job, instance, device) group_right\n  group by (job, instance, device, job_name, rank) (npu_job_info{{{JOB_SEL}}})',
                JOB_LEGEND,
            ),
            unit="percentunit",
            steps=indicator_steps(util),
            lo=0,
            hi=1,
        ),
    )
    b.row("Meso: where the step time goes")
    share = f"sum by (job_name, rank, phase) (rate(npu_job_phase_seconds_total{{{JOB_SEL}}}[{rate}]))\n/ on (job_name, rank) group_left\nsum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}]))"
    b.add(
        graph(
            "Step phases",
            q(share, "{{job_name}}/{{rank}} {{phase}}"),
            unit="percentunit",
            stack=True,
            lo=0,
            description="Share of the iteration time in each phase the hooks report.",
        ),
        graph(
            "Memory-copy share (H2D + D2H)",
            q(
                f'sum by (job_name, rank) (rate(npu_job_phase_seconds_total{{{JOB_SEL}, phase=~"h2d|d2h"}}[{rate}]))\n'
                f"/ sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}]))",
                JOB_LEGEND,
            ),
            q(f"npu_profile_memcpy_ratio{{{JOB_SEL}}}", "profile " + JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(memcpy),
            lo=0,
            description=f"Healthy {memcpy.healthy_text()}, abnormal {memcpy.abnormal_text()} (NPUMemcpyHigh).",
        ),
        graph(
            "Framework overhead share",
            q(
                f'sum by (job_name, rank) (rate(npu_job_phase_seconds_total{{{JOB_SEL}, phase="framework"}}[{rate}]))\n'
                f"/ sum by (job_name, rank) (rate({dur}_sum{{{JOB_SEL}}}[{rate}]))",
                JOB_LEGEND,
            ),
            q(f"npu_profile_framework_overhead_ratio{{{JOB_SEL}}}", "profile " + JOB_LEGEND),
            unit="percentunit",
            steps=indicator_steps(framework),
            lo=0,
            description=f"Healthy {framework.healthy_text()} (NPUFrameworkOverheadHigh).",
        ),
        graph(
            "Framework memory (allocator)",
            q(f"npu_job_memory_allocated_bytes{{{JOB_SEL}}}", JOB_LEGEND),
            q(f"npu_job_memory_max_allocated_bytes{{{JOB_SEL}}}", "peak " + JOB_LEGEND),
            unit="bytes",
            lo=0,
        ),
        grid("Reporting processes", q(f"npu_job_info{{{JOB_SEL}}}", table_format=True), hidden=("__name__", "Value")),
    )
    b.row("Micro: latest profiles")
    pro = f"{{{JOB_SEL}}}"
    b.add(
        bars(
            "Step composition (latest profile)",
            q(f"npu_profile_compute_ratio{pro}", "compute " + JOB_LEGEND),
            q(f"npu_profile_communication_ratio{pro}", "communication " + JOB_LEGEND),
            q(f"npu_profile_idle_ratio{pro}", "idle " + JOB_LEGEND),
            q(f"npu_profile_memcpy_ratio{pro}", "memcpy " + JOB_LEGEND),
            q(f"npu_profile_framework_overhead_ratio{pro}", "framework " + JOB_LEGEND),
            unit="percentunit",
            lo=0,
            hi=1,
        ),
        grid(
            "Top operators (latest profile)",
            q(f"npu_profile_operator_time_ratio{pro}", table_format=True),
            unit="percentunit",
            steps=limit_steps(hot.abnormal, RED),
            hidden=("__name__", "job", "instance"),
            sort="position",
        ),
        bars(
            "Top-3 and hottest operator share",
            q(f"npu_profile_top3_operator_ratio{pro}", "top 3 " + JOB_LEGEND),
            q(f"npu_profile_max_operator_ratio{pro}", "hottest " + JOB_LEGEND),
            unit="percentunit",
            steps=[
                dm.Threshold(value=None, color=GREEN),
                dm.Threshold(value=top3.healthy, color=ORANGE),
                dm.Threshold(value=hot.abnormal, color=RED),
            ],
            lo=0,
            hi=1,
            description=f"Top 3 healthy {top3.healthy_text()}; one operator abnormal {hot.abnormal_text()}.",
        ),
        graph("Profiled step time", q(f"npu_profile_step_duration_seconds{pro}", JOB_LEGEND), unit="s", lo=0),
        graph("Profile age", q(f"time() - npu_profile_last_update_timestamp_seconds{pro}", JOB_LEGEND), unit="s", lo=0),
    )
    return b


def capacity(table_: Thresholds) -> Board:
    util = table_["device_utilization"]
    steps = indicator_steps(util)
    quantiles = table_.recording.quantiles
    b = Board(
        "capacity-planning",
        "Utilization trends, distribution, idle capacity, allocation versus use and a 30-day forecast, "
        "from the recording rules (alerts/cann-exporter.rules.yml).",
        time_from="now-30d",
        refresh="15m",
        variables=[datasource_var()],
    )
    b.row("Trends")
    b.add(
        graph(
            "Cluster utilization (1h and daily means)",
            q("cluster:npu_aicore_utilization_ratio:avg1h", "1h mean (chips)"),
            q("cluster:npu_aicore_utilization_ratio:avg1d", "daily mean"),
            q("cluster:npu_aicore_utilization_ratio_in_use:avg5m", "chips in use, 5m"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
        ),
        graph(
            "Utilization quantiles across chips (1h)",
            *[q(f'cluster:npu_aicore_utilization_ratio:quantile_avg1h{{quantile="{num(v)}"}}', f"p{num(v * 100)}") for v in quantiles],
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
        ),
        graph(
            "Utilization by node (daily)",
            q("instance:npu_aicore_utilization_ratio:avg1d", "{{instance}}"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
        ),
        graph(
            "Utilization by namespace (1h)",
            q("namespace:npu_aicore_utilization_ratio:avg1h", "{{namespace}}"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description="Chips attributed to namespaces by the kubelet (npu_pod_info).",
        ),
    )
    b.row("Distribution and idle capacity")
    b.add(
        bars(
            "Chips by daily utilization",
            *[
                q(
                    f"count(chip:npu_aicore_utilization_ratio:avg1d >= {num(lo_)} < {num(hi_)}) or vector(0)",
                    f"{pct(lo_)}-{pct(hi_)}",
                    instant=True,
                )
                for lo_, hi_ in ((0, util.abnormal or 0.6), (util.abnormal or 0.6, util.healthy or 0.85), (util.healthy or 0.85, 1.01))
            ],
            unit="short",
            decimals=0,
            description="Chips below the abnormal bound, in between, and healthy, by their daily mean.",
        ),
        graph(
            "Idle and unused chip-hours per day",
            q("cluster:npu_chip_hours:sum1d", "observed"),
            q("cluster:npu_idle_chip_hours:sum1d", "idle (nothing on the chip)"),
            q("cluster:npu_unused_chip_hours:sum1d", "unused (AI Cores not busy)"),
            unit="short",
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
    )
    b.row("Allocation versus use")
    b.add(
        graph(
            "Chips: total, in use, below target",
            q("cluster:npu_chips:count", "total"),
            q("cluster:npu_chips_in_use:sum", "in use"),
            q("cluster:npu_chips_low_utilization:sum", "in use, below target"),
            q("sum(namespace:npu_chips:count)", "allocated to pods"),
            unit="short",
            lo=0,
            decimals=0,
        ),
        graph(
            "Allocation and use",
            q("cluster:npu_allocation:ratio", "allocated (in use / total)"),
            q("cluster:npu_aicore_utilization_ratio_in_use:avg5m", "use of allocated chips"),
            q("cluster:npu_aicore_utilization_ratio:avg5m", "use of all chips"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
        ),
        graph("HBM headroom", q("cluster:npu_hbm_headroom_bytes:sum", "free HBM (cluster)"), unit="bytes", lo=0, w=8),
        graph(
            "Peak HBM use (daily)",
            q("cluster:npu_hbm_usage:max1d", "busiest chip"),
            q("instance:npu_hbm_usage:max1d", "{{instance}}"),
            unit="percentunit",
            lo=0,
            hi=1,
            w=8,
        ),
        graph("Chips in use (daily mean)", q("cluster:npu_chips_in_use:avg1d", "in use"), unit="short", lo=0, w=8),
    )
    b.row("Forecast")
    b.add(
        graph(
            "Chips in use: 7-day trend projected 30 days",
            q("cluster:npu_chips_in_use:sum", "now"),
            q(forecast("cluster:npu_chips_in_use:sum", "0", f"scalar({CHIPS})"), "in 30 days"),
            q(CHIPS, "capacity"),
            unit="short",
            lo=0,
            decimals=0,
            description=(
                f"predict_linear over the last 7 days, between 0 and the chips there are: reaching capacity "
                f"means plan more chips. Empty until the record has {MIN_FORECAST_DAYS} days of history."
            ),
        ),
        graph(
            "Utilization: 7-day trend projected 30 days",
            q("cluster:npu_aicore_utilization_ratio:avg1h", "now"),
            q(forecast("cluster:npu_aicore_utilization_ratio:avg1h", "0", "1"), "in 30 days"),
            unit="percentunit",
            steps=steps,
            lo=0,
            hi=1,
            description=f"predict_linear over the last 7 days, between 0 and 100%. Empty until the record has "
            f"{MIN_FORECAST_DAYS} days of history.",
        ),
    )
    return b


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


def _has(table_: Thresholds, alert: str) -> bool:
    return any(a.alert == alert for a in table_.alerts)


BOARDS = (fleet, node, jobs, capacity, exporter_health)


def dashboards(table_: Thresholds) -> dict[str, dict[str, Any]]:
    """``{file stem: dashboard JSON model}`` of the five dashboards."""
    out = {}
    for make in BOARDS:
        board = make(table_)
        out[board.key] = board.build()
    return out
