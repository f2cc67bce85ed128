"""NetworkCollector from plain PortSamples: names, labels, base units, absence."""

from __future__ import annotations

from exporter.hccn import metrics as m
from exporter.hccn.collector import NetworkCollector
from exporter.hccn.part import (
    NET_HEALTH_STATES,
    NetworkCounter,
    NetworkPart,
    OpticalLaneSample,
    PortSample,
)
from tests.support.exposition import exposition, value
from tests.support.exposition import render as render_part

PORT = PortSample(
    npu=3,
    chip=0,
    device=3,
    port="",
    link_up=True,
    link_up_transitions=4,
    link_down_transitions=3,
    speed_bytes_per_second=25e9,
    health="Socket fail",
    receive_bytes_per_second=266.84e6,
    transmit_bytes_per_second=0.0,
    packets=(NetworkCounter("rx", "pfc", 12), NetworkCounter("tx", "cnp", 5)),
    errors=(NetworkCounter("rx", "fcs", 2), NetworkCounter("", "qp_status", 1)),
    bytes=(NetworkCounter("rx", "mac", 4096),),
    optical_present=True,
    optical_temperature_celsius=47.0,
    optical_voltage_volts=3.2629,
    optical_lanes=(OpticalLaneSample(0, 4.4035e-3, 1.0189e-3), OpticalLaneSample(2, None, None)),
    address="11.12.165.80",
    netmask="255.255.255.0",
)
A5_PORT = PortSample(npu=0, chip=0, device=None, port="0/4", link_up=False, optical_present=False)


def render(ports) -> dict[tuple[str, frozenset], float]:
    return render_part(NetworkCollector(), NetworkPart(tuple(ports)))


def test_base_units_and_labels():
    found = render([PORT])
    chip = {"npu": "3", "chip": "0", "device": "3", "port": ""}
    assert value(found, "npu_network_link_up", **chip) == 1
    assert value(found, "npu_network_link_up_transitions_total", **chip) == 4
    assert value(found, "npu_network_link_down_transitions_total", **chip) == 3
    assert value(found, "npu_network_speed_bytes", **chip) == 25e9  # 200 Gb/s
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
    assert states == {state: (1 if state == "Socket fail" else 0) for state in NET_HEALTH_STATES}


def test_a5_port_label_and_absent_readings():
    found = render([A5_PORT])
    assert value(found, "npu_network_link_up", port="0/4", device="") == 0
    assert value(found, "npu_optical_present", port="0/4") == 0
    assert value(found, "npu_network_speed_bytes") is None
    assert not [n for (n, _) in found if n == "npu_network_health"]


def test_no_ports_no_families_at_all():
    assert exposition(NetworkCollector(), NetworkPart()) == ""


def test_every_family_is_in_the_contract():
    assert NetworkCollector.specs == m.NETWORK_METRICS
    for spec in m.NETWORK_METRICS:
        assert spec.labels[:4] == ("npu", "chip", "device", "port")
