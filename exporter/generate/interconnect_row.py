"""The node dashboard's "Health and interconnect" row: npu-smi's PCIe, HCCS and die-to-die
(SIO) counters, the chip sensors and voltage, with the bounds of their alerts from the table."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.panels import (
    CHIP_LEGEND,
    CHIP_SEL,
    GREEN,
    ORANGE,
    RED,
    Board,
    graph,
    grid,
    history,
    limit_steps,
    q,
)
from exporter.thresholds.table import Thresholds, num

LINK_LEGEND = "{{device}} link {{link}}"


def interconnect_row(b: Board, table_: Thresholds) -> None:
    """The row, in lines of 24 columns. The chip's fault level belongs first: added as an 8-wide
    panel before HCCS health, that one narrows to 8."""
    spec = {
        name: table_.find(name)
        for name in ("NPUPCIeErrors", "NPUHCCSLinkDown", "NPUHCCSErrors", "NPUSIOErrors", "NPUSensorTemperatureHigh")
    }
    pcie, link_down, hccs, sio, sensor = (spec[n] for n in spec)
    hot = sensor.threshold if sensor else None
    hot_sensors = ", ".join(sensor.param("sensors", ("soc_max",))) if sensor else ""

    def fires(alert: object, text: str) -> str:
        return text if alert is not None else ""

    b.row("Health and interconnect")
    b.add(
        history(
            "HCCS health",
            q(f"npu_hccs_healthy{{{CHIP_SEL}}}", CHIP_LEGEND),
            h=6,
            w=16,
            steps=[dm.Threshold(value=None, color=RED), dm.Threshold(value=1, color=GREEN)],
            mappings=[
                dm.ValueMap(
                    options={
                        "0": dm.ValueMappingResult(text="NOK", color=RED, index=0),
                        "1": dm.ValueMappingResult(text="OK", color=GREEN, index=1),
                    }
                )
            ],
            description="npu-smi -t hccs health status of each chip's HCCS links"
            + fires(link_down, f"; NPUHCCSLinkDown fires when a chip stays NOK for {link_down.window if link_down else ''}.")
            + " Chips without HCCS (or whose product does not answer) are absent.",
        ),
        graph(
            "PCIe errors (increase over 1h)",
            q(f"increase(npu_pcie_errors_total{{{CHIP_SEL}}}[1h])", "{{device}} {{type}}"),
            unit="short",
            lo=0,
            w=8,
            steps=limit_steps(pcie.threshold if pcie else None, ORANGE),
            description="npu-smi -t pcie-err counters by type (tx, rx, lcrc, ecrc, retry; 310-class cards their own)"
            + fires(
                pcie, f"; NPUPCIeErrors fires when their sum rises above {num(pcie.threshold or 0)} within {pcie.range if pcie else ''}."
            ),
        ),
        graph(
            "HCCS errors and retries per link (increase over 1h)",
            q(f"increase(npu_hccs_errors_total{{{CHIP_SEL}}}[1h])", "errors " + LINK_LEGEND),
            q(f"increase(npu_hccs_retries_total{{{CHIP_SEL}}}[1h])", "retries " + LINK_LEGEND),
            unit="short",
            lo=0,
            w=8,
            steps=limit_steps(hccs.threshold if hccs else None, ORANGE),
            description="CRC errors and retransmissions per HCCS link (npu-smi -t hccs)"
            + fires(hccs, f"; NPUHCCSErrors fires on errors above {num(hccs.threshold or 0)} within {hccs.range if hccs else ''}."),
        ),
        graph(
            "HCCS bandwidth per link",
            q(f'npu_hccs_bandwidth_bytes_per_second{{{CHIP_SEL}, direction="rx"}}', "rx " + LINK_LEGEND),
            q(f'-npu_hccs_bandwidth_bytes_per_second{{{CHIP_SEL}, direction="tx"}}', "tx " + LINK_LEGEND),
            unit="Bps",
            w=8,
            description="npu-smi -t hccs-bw, averaged over its sampling time (npu_smi.hccs_bw_time, every "
            "npu_smi.hccs_bw_interval); transmit below zero. A link far below its peers is the suspect one.",
        ),
        graph(
            "Die-to-die (SIO) errors (increase over 1h)",
            q(f"increase(npu_sio_errors_total{{{CHIP_SEL}}}[1h])", "{{device}} {{direction}}"),
            unit="short",
            lo=0,
            w=8,
            steps=limit_steps(sio.threshold if sio else None, ORANGE),
            description="npu-smi -t sio-info (Atlas A3 and 950: two dies per NPU)"
            + fires(sio, f"; NPUSIOErrors fires above {num(sio.threshold or 0)} within {sio.range if sio else ''}."),
        ),
        graph(
            "Sensor temperatures",
            q(f"npu_sensor_temperature_celsius{{{CHIP_SEL}}}", "{{device}} {{sensor}}"),
            unit="celsius",
            w=12,
            h=8,
            steps=limit_steps(hot),
            description="npu-smi -t sensors: SoC hottest point, SFP, NDIE, HBM (the same HBM reading as the Temperature panel)"
            + fires(
                sensor, f"; NPUSensorTemperatureHigh fires when {hot_sensors} stays above {num(hot or 0)} °C (a published junction limit)."
            ),
        ),
        graph(
            "Voltage",
            q(f"npu_voltage_volts{{{CHIP_SEL}}}", CHIP_LEGEND),
            unit="volt",
            w=12,
            description="npu-smi -t volt: the chip's supply voltage.",
        ),
        grid(
            "HCCS links: lanes and speed",
            q(f"npu_hccs_link_info{{{CHIP_SEL}}}", table_format=True),
            hidden=("__name__", "job", "Value"),
            w=12,
            description="Lanes in use, the lane bitmap and the speed (Gbit/s, lanes x 56) of each link: a link with fewer lanes is degraded.",
        ),
        grid(
            "Super pod",
            q(f"npu_superpod_info{{{CHIP_SEL}}}", table_format=True),
            hidden=("__name__", "job", "Value"),
            w=12,
            description="npu-smi -t spod-info (A3 and 950 super pods): pod id, size, server index and SDID of each chip.",
        ),
    )
