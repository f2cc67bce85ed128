"""The node dashboard's "Network" row: hccn_tool's ports and optical modules."""

from __future__ import annotations

from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import dbm
from exporter.generate.network_rules import (
    optical_power_limits,
)
from exporter.generate.panels import (
    CHIP_SEL,
    GREEN,
    ORANGE,
    RED,
    Board,
    graph,
    history,
    limit_steps,
    q,
)
from exporter.hccn.records import NET_HEALTH_STATES
from exporter.thresholds.table import Thresholds, num

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
        name: table_.find(name)
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
