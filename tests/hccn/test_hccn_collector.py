"""NetworkCollector from plain PortSamples: names, labels, base units, staleness, absence."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from exporter import metrics as m
from exporter.collectors.network import NetworkCollector
from exporter.snapshot import NetworkCounter, OpticalLaneSample, PortSample
from tests.exposition import samples, value

NOW = 1_780_000_000.0

PORT = PortSample(
    npu=3, chip=0, device=3, port="", observed_at=NOW - 5,
    link_up=True, link_up_transitions=4, link_down_transitions=3, speed_bits_per_second=200e9,
    health="Socket fail", receive_bytes_per_second=266.84e6, transmit_bytes_per_second=0.0,
    packets=(NetworkCounter("rx", "pfc", 12), NetworkCounter("tx", "cnp", 5)),
    errors=(NetworkCounter("rx", "fcs", 2), NetworkCounter("", "qp_status", 1)),
    bytes=(NetworkCounter("rx", "mac", 4096),),
    optical_present=True, optical_temperature_celsius=47.0, optical_voltage_volts=3.2629,
    optical_lanes=(OpticalLaneSample(0, 4.4035e-3, 1.0189e-3), OpticalLaneSample(2, None, None)),
    address="11.12.165.80", netmask="255.255.255.0",
)
A5_PORT = PortSample(npu=0, chip=0, device=None, port="0/4", observed_at=NOW, link_up=False, optical_present=False)


def render(ports, now: float = NOW, max_age: float = 60.0) -> dict[tuple[str, frozenset], float]:
    registry = CollectorRegistry()
    registry.register(NetworkCollector(lambda: ports, max_age, clock=lambda: now))
    return samples(generate_latest(registry).decode())


def test_base_units_and_labels():
    found = render([PORT])
    chip = {"npu": "3", "chip": "0", "device": "3", "port": ""}
    assert value(found, "npu_network_link_up", **chip) == 1
    assert value(found, "npu_network_link_up_transitions_total", **chip) == 4
    assert value(found, "npu_network_link_down_transitions_total", **chip) == 3
    assert value(found, "npu_network_speed_bits_per_second", **chip) == 200e9
    assert value(found, "npu_network_receive_bytes_per_second", **chip) == 266.84e6
    assert value(found, "npu_network_transmit_bytes_per_second", **chip) == 0
    assert value(found, "npu_network_packets_total", direction="rx", kind="pfc") == 12
    assert value(found, "npu_network_errors_total", direction="", kind="qp_status") == 1
    assert value(found, "npu_network_bytes_total", direction="rx", kind="mac") == 4096
    assert value(found, "npu_optical_present", **chip) == 1
    assert value(found, "npu_optical_temperature_celsius", **chip) == 47
    assert value(found, "npu_optical_voltage_volts", **chip) == 3.2629
    assert value(found, "npu_optical_tx_power_watts", lane="0") == 4.4035e-3
    assert value(found, "npu_optical_rx_power_watts", lane="0") == 1.0189e-3
    assert value(found, "npu_optical_rx_power_watts", lane="2") is None  # NA lane: absent, not 0
    assert value(found, "npu_network_info", address="11.12.165.80", netmask="255.255.255.0") == 1


def test_health_is_a_stateset():
    found = render([PORT])
    states = {dict(ls)["state"]: v for (n, ls), v in found.items() if n == "npu_network_health"}
    assert states == {state: (1 if state == "Socket fail" else 0) for state in m.NETWORK_HEALTH_STATES}


def test_a5_port_label_and_absent_readings():
    found = render([A5_PORT])
    assert value(found, "npu_network_link_up", port="0/4", device="") == 0
    assert value(found, "npu_optical_present", port="0/4") == 0
    assert value(found, "npu_network_speed_bits_per_second") is None
    assert not [n for (n, _) in found if n == "npu_network_health"]


def test_no_ports_no_families_at_all():
    registry = CollectorRegistry()
    registry.register(NetworkCollector(lambda: (), 60.0, clock=lambda: NOW))
    assert generate_latest(registry) == b""


def test_stale_ports_are_withheld():
    found = render([PORT, A5_PORT], now=NOW + 58)  # PORT read 63 s ago, A5_PORT 58 s ago
    assert value(found, "npu_network_link_up", npu="3") is None
    assert value(found, "npu_network_link_up", npu="0") == 0


def test_every_family_is_in_the_contract():
    described = {f.name for f in NetworkCollector(lambda: (), 60.0).describe()}
    assert described == {spec.family_name for spec in m.NETWORK_METRICS}
    for spec in m.NETWORK_METRICS:
        assert spec.labels[:4] == ("npu", "chip", "device", "port")
