"""Per-port network and optics metrics from the hccn_tool part of the snapshot.

With no hccn_tool (inference-only nodes, or hccn disabled) the snapshot has no ports and
this collector emits nothing at all, not even empty families.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.collectors import chip_labels, family, field_families, label, stateset
from exporter.snapshot import PortSample

# Plain gauges: (spec, snapshot field).
_GAUGES = (
    (m.NETWORK_SPEED, "speed_bits_per_second"),
    (m.NETWORK_RECEIVE, "receive_bytes_per_second"),
    (m.NETWORK_TRANSMIT, "transmit_bytes_per_second"),
    (m.OPTICAL_TEMPERATURE, "optical_temperature_celsius"),
    (m.OPTICAL_VOLTAGE, "optical_voltage_volts"),
)
_COUNTERS = (
    (m.NETWORK_LINK_UP_TRANSITIONS, "link_up_transitions"),
    (m.NETWORK_LINK_DOWN_TRANSITIONS, "link_down_transitions"),
)
_BOOLEANS = (
    (m.NETWORK_LINK_UP, "link_up"),
    (m.OPTICAL_PRESENT, "optical_present"),
)
_LABELLED_COUNTERS = (
    (m.NETWORK_PACKETS, "packets"),
    (m.NETWORK_ERRORS, "errors"),
    (m.NETWORK_BYTES, "bytes"),
)


def port_labels(port: PortSample) -> list[str]:
    return chip_labels(port) + [port.port]


class NetworkCollector:
    """Renders ports; a port whose newest read is older than ``max_age`` is withheld."""

    def __init__(
        self,
        ports: Callable[[], Iterable[PortSample]],
        max_age: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ports = ports
        self.max_age = max_age
        self.clock = clock

    def describe(self) -> Iterator[Metric]:
        for spec in m.NETWORK_METRICS:
            yield family(spec)

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        ports = [p for p in self.ports() if now - p.observed_at <= self.max_age]
        if not ports:
            return
        info = family(m.NETWORK_INFO)
        for port in ports:
            if port.address is not None:
                info.add_metric(port_labels(port) + [port.address, label(port.netmask)], 1)
        yield info

        for spec, field in _BOOLEANS:
            metric = family(spec)
            for port in ports:
                value = getattr(port, field)
                if value is not None:
                    metric.add_metric(port_labels(port), 1 if value else 0)
            yield metric

        yield from field_families(_GAUGES + _COUNTERS, ports, port_labels)
        yield stateset(m.NETWORK_HEALTH, m.NETWORK_HEALTH_STATES, ports, port_labels, lambda port: port.health)

        for spec, field in _LABELLED_COUNTERS:
            metric = family(spec)
            for port in ports:
                for counter in getattr(port, field):
                    metric.add_metric(port_labels(port) + [counter.direction, counter.kind], counter.value)
            yield metric

        tx, rx = family(m.OPTICAL_TX_POWER), family(m.OPTICAL_RX_POWER)
        for port in ports:
            for lane in port.optical_lanes:
                if lane.tx_power_watts is not None:
                    tx.add_metric(port_labels(port) + [str(lane.lane)], lane.tx_power_watts)
                if lane.rx_power_watts is not None:
                    rx.add_metric(port_labels(port) + [str(lane.lane)], lane.rx_power_watts)
        yield tx
        yield rx
