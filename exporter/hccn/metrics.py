"""The hccn_tool metrics: name, type, help, labels and the PortSample field that fills each."""

from __future__ import annotations

from exporter.core.metric import CHIP_LABELS, MetricSpec, spec

# `port` is empty ("" = absent in Prometheus) on chips with one port; A5 ports are "<udie>/<port>".
PORT_LABELS = CHIP_LABELS + ("port",)


def _port(name: str, help: str, *extra: str, field: str | tuple[str, ...], kind: str = "gauge") -> MetricSpec:
    return spec(name, kind, help, PORT_LABELS + extra, field=field)


NETWORK_INFO = _port("npu_network_info", "Port address (hccn_tool -ip); value 1.", "address", "netmask", field=("address", "netmask"))
NETWORK_LINK_UP = _port("npu_network_link_up", "1 if the port's link is up (hccn_tool -link), else 0.", field="link_up")
NETWORK_LINK_UP_TRANSITIONS = _port(
    "npu_network_link_up_transitions_total",
    "Link-up events since driver load or the last `-link_stat -c` (hccn_tool -link_stat).",
    field="link_up_transitions",
    kind="counter",
)
NETWORK_LINK_DOWN_TRANSITIONS = _port(
    "npu_network_link_down_transitions_total",
    "Link-down events since driver load or the last `-link_stat -c` (hccn_tool -link_stat; newer drivers only).",
    field="link_down_transitions",
    kind="counter",
)
NETWORK_SPEED = _port(
    "npu_network_speed_bytes",
    "Port speed, bytes per second (hccn_tool -speed Mb/s / 8); absent while the speed is unknown (link down).",
    field="speed_bytes_per_second",
)
NETWORK_HEALTH = _port(
    "npu_network_health", "RoCE reachability probe (hccn_tool -net_health) as a stateset: 1 for the current state.", "state", field="health"
)
NETWORK_RECEIVE = _port(
    "npu_network_receive_bytes_per_second",
    "Receive throughput over hccn_tool's -bandwidth window, bytes per second (MB/sec taken as 10^6 bytes).",
    field="receive_bytes_per_second",
)
NETWORK_TRANSMIT = _port(
    "npu_network_transmit_bytes_per_second",
    "Transmit throughput over hccn_tool's -bandwidth window, bytes per second (MB/sec taken as 10^6 bytes).",
    field="transmit_bytes_per_second",
)
NETWORK_PACKETS = _port(
    "npu_network_packets_total",
    "Packets counted by the port's MAC/RoCE/NIC counters (hccn_tool -stat); kinds overlap (mac includes pause and pfc), never sum across kind.",
    "direction",
    "kind",
    field="packets",
    kind="counter",
)
NETWORK_ERRORS = _port(
    "npu_network_errors_total",
    "Bad, dropped, retried or rejected packets counted by the port (hccn_tool -stat), by kind.",
    "direction",
    "kind",
    field="errors",
    kind="counter",
)
NETWORK_BYTES = _port(
    "npu_network_bytes_total",
    "Bytes counted by the port's MAC/NIC counters (hccn_tool -stat *_oct_num).",
    "direction",
    "kind",
    field="bytes",
    kind="counter",
)
OPTICAL_PRESENT = _port(
    "npu_optical_present", "1 if an optical module is plugged into the port, else 0 (hccn_tool -optical).", field="optical_present"
)
OPTICAL_TEMPERATURE = _port(
    "npu_optical_temperature_celsius", "Optical module temperature, degrees Celsius.", field="optical_temperature_celsius"
)
OPTICAL_VOLTAGE = _port("npu_optical_voltage_volts", "Optical module supply voltage (Vcc), volts.", field="optical_voltage_volts")
OPTICAL_TX_POWER = _port(
    "npu_optical_tx_power_watts", "Optical transmit power per lane, watts (1 mW = 0 dBm).", "lane", field="tx_power_watts"
)
OPTICAL_RX_POWER = _port(
    "npu_optical_rx_power_watts", "Optical receive power per lane, watts (1 mW = 0 dBm).", "lane", field="rx_power_watts"
)

NETWORK_METRICS = (
    NETWORK_INFO,
    NETWORK_LINK_UP,
    NETWORK_LINK_UP_TRANSITIONS,
    NETWORK_LINK_DOWN_TRANSITIONS,
    NETWORK_SPEED,
    NETWORK_HEALTH,
    NETWORK_RECEIVE,
    NETWORK_TRANSMIT,
    NETWORK_PACKETS,
    NETWORK_ERRORS,
    NETWORK_BYTES,
    OPTICAL_PRESENT,
    OPTICAL_TEMPERATURE,
    OPTICAL_VOLTAGE,
    OPTICAL_TX_POWER,
    OPTICAL_RX_POWER,
)
