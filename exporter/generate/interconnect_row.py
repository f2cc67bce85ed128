"""The node dashboard's "Health and interconnect" row: npu-smi's PCIe, HCCS and die-to-die
(SIO) counters, the chip sensors and voltage, with the bounds of their alerts from the table."""

from __future__ import annotations

from exporter.generate.panels import CHIP_LEGEND, CHIP_SEL, ORANGE, Panel, Query, alert_steps, fires, graph, info_grid, q, rx_tx, two_states
from exporter.thresholds.table import AlertSpec, Thresholds, num

LINK_LEGEND = "{{device}} link {{link}}"


def _increase(metric: str, legend: str) -> Query:
    return q(f"increase({metric}{{{CHIP_SEL}}}[1h])", legend)


def _errors(title: str, spec: AlertSpec | None, fires_on: str, description: str, *queries: Query) -> Panel:
    """Error counters' increase over 1h, orange from the threshold of the alert on them."""
    alert = fires(spec, lambda s: f"; {s.alert} fires {fires_on} {num(s.bound)} within {s.range}.")
    return graph(title, *queries, lo=0, w=8, steps=alert_steps(spec, ORANGE), description=description + alert)


def interconnect_panels(table_: Thresholds) -> list[Panel]:
    """The row, in lines of 24 columns."""
    return _links(table_) + _sensors(table_)


def _links(table_: Thresholds) -> list[Panel]:
    """HCCS health, PCIe, HCCS and die-to-die errors, HCCS bandwidth."""
    pcie, link_down, hccs, sio = (table_.find(n) for n in ("NPUPCIeErrors", "NPUHCCSLinkDown", "NPUHCCSErrors", "NPUSIOErrors"))
    return [
        two_states(
            "HCCS health",
            q(f"npu_hccs_healthy{{{CHIP_SEL}}}", CHIP_LEGEND),
            ("NOK", "OK"),
            h=6,
            w=16,
            description="npu-smi -t hccs health status of each chip's HCCS links"
            + fires(link_down, lambda s: f"; NPUHCCSLinkDown fires when a chip stays NOK for {s.window}.")
            + " Chips without HCCS (or whose product does not answer) are absent.",
        ),
        _errors(
            "PCIe errors (increase over 1h)",
            pcie,
            "when their sum rises above",
            "npu-smi -t pcie-err counters by type (tx, rx, lcrc, ecrc, retry; 310-class cards their own)",
            _increase("npu_pcie_errors_total", "{{device}} {{type}}"),
        ),
        _errors(
            "HCCS errors and retries per link (increase over 1h)",
            hccs,
            "on errors above",
            "CRC errors and retransmissions per HCCS link (npu-smi -t hccs)",
            _increase("npu_hccs_errors_total", "errors " + LINK_LEGEND),
            _increase("npu_hccs_retries_total", "retries " + LINK_LEGEND),
        ),
        rx_tx(
            "HCCS bandwidth per link",
            f'npu_hccs_bandwidth_bytes_per_second{{{CHIP_SEL}, direction="rx"}}',
            f'npu_hccs_bandwidth_bytes_per_second{{{CHIP_SEL}, direction="tx"}}',
            LINK_LEGEND,
            "npu-smi -t hccs-bw, averaged over its sampling time (npu_smi.hccs_bw_time, every "
            "npu_smi.hccs_bw_interval); transmit below zero. A link far below its peers is the suspect one.",
        ),
        _errors(
            "Die-to-die (SIO) errors (increase over 1h)",
            sio,
            "above",
            "npu-smi -t sio-info (Atlas A3 and 950: two dies per NPU)",
            _increase("npu_sio_errors_total", "{{device}} {{direction}}"),
        ),
    ]


def _sensors(table_: Thresholds) -> list[Panel]:
    """Sensor temperatures, voltage, the HCCS links' lanes and the super pod."""
    sensor = table_.find("NPUSensorTemperatureHigh")
    return [
        graph(
            "Sensor temperatures",
            q(f"npu_sensor_temperature_celsius{{{CHIP_SEL}}}", "{{device}} {{sensor}}"),
            unit="celsius",
            steps=alert_steps(sensor),
            description="npu-smi -t sensors: SoC hottest point, SFP, NDIE, HBM (the same HBM reading as the Temperature panel)"
            + fires(
                sensor,
                lambda s: (
                    f"; NPUSensorTemperatureHigh fires when {', '.join(s.param('sensors', ('soc_max',)))} stays above "
                    f"{num(s.bound)} °C (a published junction limit)."
                ),
            ),
        ),
        graph(
            "Voltage",
            q(f"npu_voltage_volts{{{CHIP_SEL}}}", CHIP_LEGEND),
            unit="volt",
            description="npu-smi -t volt: the chip's supply voltage.",
        ),
        info_grid(
            "HCCS links: lanes and speed",
            f"npu_hccs_link_info{{{CHIP_SEL}}}",
            description="Lanes in use, the lane bitmap and the speed (Gbit/s, lanes x 56) of each link: a link with fewer lanes is degraded.",
        ),
        info_grid(
            "Super pod",
            f"npu_superpod_info{{{CHIP_SEL}}}",
            description="npu-smi -t spod-info (A3 and 950 super pods): pod id, size, server index and SDID of each chip.",
        ),
    ]
