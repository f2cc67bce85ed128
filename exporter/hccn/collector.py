"""Per-port network and optics metrics from the hccn_tool part of the snapshot.

With no hccn_tool (inference-only nodes, or hccn disabled) the snapshot has no ports and
this collector emits nothing at all, not even empty families.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core.metric import chip_labels, family, field_families, label, stateset
from exporter.hccn import metrics as m
from exporter.hccn.part import NET_HEALTH_STATES, NetworkPart, PortSample

_GAUGES = (m.NETWORK_SPEED, m.NETWORK_RECEIVE, m.NETWORK_TRANSMIT, m.OPTICAL_TEMPERATURE, m.OPTICAL_VOLTAGE)
_COUNTERS = (m.NETWORK_LINK_UP_TRANSITIONS, m.NETWORK_LINK_DOWN_TRANSITIONS)
_BOOLEANS = (m.NETWORK_LINK_UP, m.OPTICAL_PRESENT)
_LABELLED_COUNTERS = (m.NETWORK_PACKETS, m.NETWORK_ERRORS, m.NETWORK_BYTES)


def port_labels(port: PortSample) -> list[str]:
    return chip_labels(port) + [port.port]


class NetworkCollector:
    specs = m.NETWORK_METRICS

    def render(self, part: NetworkPart) -> Iterator[Metric]:
        ports = part.ports
        if not ports:
            return
        info = family(m.NETWORK_INFO)
        for port in ports:
            if port.address is not None:
                info.add_metric(port_labels(port) + [port.address, label(port.netmask)], 1)
        yield info

        for spec in _BOOLEANS:
            metric = family(spec)
            for port in ports:
                value = getattr(port, spec.field)
                if value is not None:
                    metric.add_metric(port_labels(port), 1 if value else 0)
            yield metric

        yield from field_families(_GAUGES + _COUNTERS, ports, port_labels)
        yield stateset(m.NETWORK_HEALTH, NET_HEALTH_STATES, ports, port_labels)

        for spec in _LABELLED_COUNTERS:
            metric = family(spec)
            for port in ports:
                for counter in getattr(port, spec.field):
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
