"""The node dashboard's "Network" row: hccn_tool's ports and optical modules, with the bounds of
the network alerts from the table."""

from __future__ import annotations

from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import dbm
from exporter.generate.health_panels import state_code
from exporter.generate.panels import (
    ANY_RED,
    CHIP_SEL,
    GREEN,
    ORANGE,
    RED,
    Panel,
    alert_steps,
    fires,
    graph,
    history,
    q,
    rate,
    rx_tx,
    two_states,
    value_names,
)
from exporter.hccn.records import NET_HEALTH_STATES
from exporter.thresholds.alert_facts import optical_power_limits
from exporter.thresholds.table import AlertSpec, Thresholds, num

PORT_LEGEND = "{{device}} {{port}}"
PORTS = "instance, device, port"


def band_steps(low: float, high: float) -> list[dm.Threshold]:
    """Red below ``low``, green in between, red above ``high``."""
    return [dm.Threshold(value=None, color=RED), dm.Threshold(value=low, color=GREEN), dm.Threshold(value=high, color=RED)]


def network_panels(table_: Thresholds) -> list[Panel]:
    return _links(table_) + _traffic(table_) + _optics(table_)


def _links(table_: Thresholds) -> list[Panel]:
    """Link state, the probe's state and link flaps."""
    flap, health = table_.find("NPUNetworkLinkFlapping"), table_.find("NPUNetworkUnhealthy")
    flap_range = flap.range if flap and flap.range else "15m"
    ok_states = tuple(health.param("ok_states", ("Success", "Init"))) if health else ("Success", "Init")
    changes = (
        f"increase(npu_network_link_down_transitions_total{{{CHIP_SEL}}}[{flap_range}])\n"
        f"or increase(npu_network_link_up_transitions_total{{{CHIP_SEL}}}[{flap_range}])"
    )
    return [
        two_states(
            "Links up",
            q(f"npu_network_link_up{{{CHIP_SEL}}}", PORT_LEGEND),
            ("down", "up"),
            h=6,
            w=12,
            description="hccn_tool -link of every port; NPUNetworkLinkDown fires when a link stays down.",
        ),
        history(
            "Net health state",
            q(f"max by ({PORTS}) ({state_code('npu_network_health', CHIP_SEL, NET_HEALTH_STATES)})", PORT_LEGEND),
            h=6,
            w=12,
            mappings=value_names((state, GREEN if state in ok_states else RED) for state in NET_HEALTH_STATES),
            steps=ANY_RED,
            description=(
                f"hccn_tool -net_health (reachability of the port's detect address); "
                f"NPUNetworkUnhealthy fires on any state but {', '.join(ok_states)}."
            ),
        ),
        graph(
            f"Link flaps ({flap_range})",
            q(changes, PORT_LEGEND),
            lo=0,
            w=8,
            steps=alert_steps(flap),
            description=f"Link changes within {flap_range} (down count; up count on drivers without one)"
            + fires(flap, lambda s: f"; NPUNetworkLinkFlapping fires at {num(s.bound)}.", "."),
        ),
    ]


def _traffic(table_: Thresholds) -> list[Panel]:
    """Bytes, PFC frames, errors and speed of each port."""
    pfc, errors = table_.find("NPUNetworkPFCStorm"), table_.find("NPUNetworkErrors")
    mac = f'{CHIP_SEL}, kind="mac", direction='
    return [
        rx_tx(
            "Throughput",
            rate("npu_network_bytes_total", PORTS, mac + '"rx"'),
            rate("npu_network_bytes_total", PORTS, mac + '"tx"'),
            PORT_LEGEND,
            "Bytes through the port's MAC (hccn_tool -stat counters); transmit drawn below zero.",
        ),
        rx_tx(
            "Bandwidth (hccn_tool -bandwidth)",
            f"npu_network_receive_bytes_per_second{{{CHIP_SEL}}}",
            f"npu_network_transmit_bytes_per_second{{{CHIP_SEL}}}",
            PORT_LEGEND,
            "The driver's own throughput reading (also on ports without byte counters, A5); transmit below zero.",
        ),
        graph(
            "PFC frames/s",
            q(rate("npu_network_packets_total", PORTS, f'{CHIP_SEL}, kind="pfc"'), PORT_LEGEND),
            unit="pps",
            lo=0,
            w=8,
            steps=alert_steps(pfc, ORANGE),
            description="PFC pause frames received + sent per port"
            + fires(pfc, lambda s: f"; NPUNetworkPFCStorm fires above {num(s.bound)}/s for {s.window}.", "."),
        ),
        graph(
            "Errors/s by kind",
            q(rate("npu_network_errors_total", f"{PORTS}, kind", CHIP_SEL), "{{device}} {{port}} {{kind}}"),
            unit="pps",
            lo=0,
            w=8,
            steps=alert_steps(errors, ORANGE),
            description="Bad, dropped, retried or rejected packets (hccn_tool -stat) by kind" + fires(errors, _errors_text, "."),
        ),
        graph(
            "Port speed",
            q(f"npu_network_speed_bytes{{{CHIP_SEL}}}", PORT_LEGEND),
            unit="Bps",
            lo=0,
            w=8,
            description="Negotiated speed; absent while the link is down.",
        ),
    ]


def _errors_text(spec: AlertSpec) -> str:
    kinds = ", ".join(spec.param("kinds", ()))
    return f"; NPUNetworkErrors fires when {kinds} together exceed {num(spec.bound)}/s for {spec.window}."


def _optics(table_: Thresholds) -> list[Panel]:
    """Each lane's receive and transmit power, and the module's temperature."""
    power, hot = table_.find("NPUOpticalPowerOutOfRange"), table_.find("NPUOpticalTemperatureHigh")
    limits = optical_power_limits(power) if power else {}
    return [
        _optical_power("rx", "Optical receive power", limits.get("rx")),
        _optical_power("tx", "Optical transmit power", limits.get("tx")),
        graph(
            "Optical module temperature",
            q(f"npu_optical_temperature_celsius{{{CHIP_SEL}}}", PORT_LEGEND),
            unit="celsius",
            w=8,
            steps=alert_steps(hot),
            description=fires(hot, lambda s: f"NPUOpticalTemperatureHigh fires above {num(s.bound)} °C for {s.window}."),
        ),
    ]


def _optical_power(direction: str, title: str, limits: tuple[float, float] | None) -> timeseries.Panel:
    """One direction's power per lane in dBm, between NPUOpticalPowerOutOfRange's limits (watts)."""
    metric = f"npu_optical_{direction}_power_watts"
    steps, text = None, ""
    if limits:
        low, high = dbm(limits[0]), dbm(limits[1])
        steps = band_steps(round(low, 2), round(high, 2))
        text = f"; NPUOpticalPowerOutOfRange fires outside {low:.1f} to {high:+.1f} dBm"
    return graph(
        title,
        q(f"10 * log10(clamp_min({metric}{{{CHIP_SEL}}} * 1000, 0.0001))", "{{device}} {{port}} lane {{lane}}"),
        unit="dBm",
        steps=steps,
        w=8,
        description=f"Per lane, in dBm (10 log10 of mW; a dark lane is drawn at -40 dBm){text}.",
    )
