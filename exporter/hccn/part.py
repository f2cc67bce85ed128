"""The hccn_tool part of the snapshot (one PortSample per chip port), and the pure conversion
from parsed records to it, in base units (bits and bytes per second, watts, volts)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from exporter.core.snapshot import PartKey
from exporter.hccn.records import NET_HEALTH_STATES, Bandwidth, IpConfig, LinkStats, LinkStatus, NetHealth, OpticalInfo, Speed, StatCounters

MEGABYTE = 1_000_000  # `MB/sec`: the tool does not say; network convention (10^6)
MEGABIT = 1_000_000
__all__ = [
    "NET_HEALTH_STATES",
    "Counters",
    "NetworkCounter",
    "NetworkPart",
    "OpticalLaneSample",
    "PortSample",
    "classify_counters",
    "port_sample",
]


@dataclass(frozen=True)
class NetworkCounter:
    """One cumulative hccn_tool `-stat` counter, classified for the metric labels."""

    direction: str  # rx, tx, or "" where the counter has none
    kind: str  # pfc, pause, roce, cnp, fcs, bad_packets, ... (the tables below)
    value: int


@dataclass(frozen=True)
class OpticalLaneSample:
    lane: int
    tx_power_watts: float | None = None  # `-optical` Tx PowerN (mW) / A5 TxPower LaneN (dBm)
    rx_power_watts: float | None = None


@dataclass(frozen=True)
class PortSample:
    """One network port of a chip (hccn_tool). Field comments name the command it comes from."""

    npu: int
    chip: int
    device: int | None
    port: str  # "" for a chip's only port; A5 "<udie>/<port>"
    link_up: bool | None = None  # `-link` link status
    link_up_transitions: int | None = None  # `-link_stat` link up count
    link_down_transitions: int | None = None  # `-link_stat` link down count (newer drivers)
    speed_bytes_per_second: float | None = None  # `-speed` (None: Unknown!, link down)
    health: str | None = None  # `-net_health`, one of NET_HEALTH_STATES
    receive_bytes_per_second: float | None = None  # `-bandwidth` RX
    transmit_bytes_per_second: float | None = None  # `-bandwidth` TX
    packets: tuple[NetworkCounter, ...] = ()  # `-stat` packet counters
    errors: tuple[NetworkCounter, ...] = ()  # `-stat` error counters
    bytes: tuple[NetworkCounter, ...] = ()  # `-stat` *_oct_num byte counters
    optical_present: bool | None = None  # `-optical` present
    optical_temperature_celsius: float | None = None
    optical_voltage_volts: float | None = None  # `-optical` Vcc (mV)
    optical_lanes: tuple[OpticalLaneSample, ...] = ()
    address: str | None = None  # `-ip` ipaddr
    netmask: str | None = None


@dataclass(frozen=True)
class NetworkPart:
    """Every port with a fresh reading; empty when hccn_tool is off or absent."""

    ports: tuple[PortSample, ...] = ()


# --- records -> samples (pure) ------------------------------------------------------------------


class Counters(NamedTuple):
    """`-stat` counters by metric family."""

    packets: tuple[NetworkCounter, ...] = ()
    errors: tuple[NetworkCounter, ...] = ()
    bytes: tuple[NetworkCounter, ...] = ()


def port_sample(npu: int, chip: int, device: int | None, port: str, readings: Mapping[str, object]) -> PortSample:
    """One PortSample from the latest fresh record of each command (base units)."""
    link = readings.get("link")
    stats = readings.get("link_stat")
    speed = readings.get("speed")
    megabits = speed.megabits_per_second if isinstance(speed, Speed) else None  # None: Unknown!, link down
    health = readings.get("net_health")
    bandwidth = readings.get("bandwidth")
    stat = readings.get("stat")
    counters = classify_counters(stat.counters) if isinstance(stat, StatCounters) else Counters()
    optical = readings.get("optical")
    present, temperature, volts, lanes = _optical(optical) if isinstance(optical, OpticalInfo) else (None, None, None, ())
    ips = readings.get("ip")
    ip = ips[0] if isinstance(ips, tuple) and ips and isinstance(ips[0], IpConfig) else None
    return PortSample(
        npu=npu,
        chip=chip,
        device=device,
        port=port,
        link_up=link.up if isinstance(link, LinkStatus) else None,
        link_up_transitions=stats.up_count if isinstance(stats, LinkStats) else None,
        link_down_transitions=stats.down_count if isinstance(stats, LinkStats) else None,
        speed_bytes_per_second=None if megabits is None else megabits * MEGABIT / 8,
        health=health.status if isinstance(health, NetHealth) else None,
        receive_bytes_per_second=bandwidth.rx_mb_per_second * MEGABYTE if isinstance(bandwidth, Bandwidth) else None,
        transmit_bytes_per_second=bandwidth.tx_mb_per_second * MEGABYTE if isinstance(bandwidth, Bandwidth) else None,
        packets=counters.packets,
        errors=counters.errors,
        bytes=counters.bytes,
        optical_present=present,
        optical_temperature_celsius=temperature,
        optical_voltage_volts=volts,
        optical_lanes=lanes,
        address=ip.address if ip else None,
        netmask=ip.netmask if ip else None,
    )


Optical = tuple[bool | None, float | None, float | None, tuple[OpticalLaneSample, ...]]


def _optical(info: OpticalInfo) -> Optical:
    """optical_present, its temperature, voltage and lanes."""
    if info.present is False:
        return False, None, None, ()  # an absent module prints NA (or stale) readings
    lanes = tuple(OpticalLaneSample(index, _watts(lane.tx_power_mw), _watts(lane.rx_power_mw)) for index, lane in info.lanes)
    return info.present, info.temperature_celsius, None if info.vcc_mv is None else info.vcc_mv / 1000.0, lanes


def _watts(mw: float | None) -> float | None:
    return None if mw is None else mw / 1000.0


# --- `-stat` counters -> packets / errors / bytes ----------------------------------------------
# 910B/A3 keys (docs/formats/hccn_tool.md, "Counter classification"). Kinds overlap by design (mac counts pause and pfc frames too).
_PACKETS = {
    **{f"mac_{d}_total_pkt_num": (d, "mac") for d in ("rx", "tx")},
    **{f"mac_{d}_mac_pause_num": (d, "pause") for d in ("rx", "tx")},
    **{f"mac_{d}_pfc_pkt_num": (d, "pfc") for d in ("rx", "tx")},
    **{f"mac_{d}_pfc_pri{n}_pkt_num": (d, f"pfc_pri{n}") for d in ("rx", "tx") for n in range(8)},
    **{f"roce_{d}_all_pkt_num": (d, "roce") for d in ("rx", "tx")},
    **{f"roce_{d}_rc_pkt_num": (d, "roce_rc") for d in ("rx", "tx")},
    **{f"roce_{d}_cnp_pkt_num": (d, "cnp") for d in ("rx", "tx")},
    **{f"nic_{d}_all_pkg_num": (d, "nic") for d in ("rx", "tx")},
    "roce_ecn_db_num": ("rx", "ecn"),
}
_ERRORS = {
    **{f"mac_{d}_bad_pkt_num": (d, "bad_packets") for d in ("rx", "tx")},
    **{f"roce_{d}_err_pkt_num": (d, "roce") for d in ("rx", "tx")},
    "mac_rx_fcs_err_pkt_num": ("rx", "fcs"),
    "roce_unexpected_ack_num": ("rx", "unexpected_ack"),
    "roce_out_of_order_num": ("rx", "out_of_order"),
    "roce_verification_err_num": ("rx", "verification"),
    "roce_qp_status_err_num": ("", "qp_status"),
    "roce_new_pkt_rty_num": ("tx", "retry"),
    # A5 (UB ports, `key: value`)
    "retry_req_sum": ("", "retry_request"),
    "retry_ack_sum": ("", "retry_ack"),
    "crc_error_sum": ("rx", "crc"),
}
_BYTES = {
    **{f"mac_{d}_total_oct_num": (d, "mac") for d in ("rx", "tx")},
    **{f"mac_{d}_bad_oct_num": (d, "mac_bad") for d in ("rx", "tx")},
    **{f"nic_{d}_all_oct_num": (d, "nic") for d in ("rx", "tx")},
}
# A5 `<what>_cnt_rx|tx`: packet kinds unless <what> names an error.
_A5_COUNTER_RE = re.compile(r"^([a-z0-9_]+?)(?:_pkt)?_cnt_(rx|tx)$")
_A5_ERRORS = {
    "drop_ind": "drop",
    "err_ind": "error_indication",
    "route_err": "route",
    "out_err": "out",
    "length_err": "length",
    "unknown": "unknown_packet",
}
_A5_RENAMES = {"lpbk_ind": "loopback"}


def classify_counters(counters: Iterable[tuple[str, int]]) -> Counters:
    """`-stat` key/values by family (packets, errors, bytes); unknown keys dropped."""
    out: dict[str, dict[tuple[str, str], NetworkCounter]] = {"packets": {}, "errors": {}, "bytes": {}}
    for key, value in counters:
        found = _classify(key)
        if found is not None:
            family, direction, kind = found
            out[family].setdefault((direction, kind), NetworkCounter(direction, kind, value))  # one series each
    return Counters(tuple(out["packets"].values()), tuple(out["errors"].values()), tuple(out["bytes"].values()))


def _classify(key: str) -> tuple[str, str, str] | None:
    for family, table in (("packets", _PACKETS), ("errors", _ERRORS), ("bytes", _BYTES)):
        if key in table:
            return (family, *table[key])
    match = _A5_COUNTER_RE.match(key)
    if match is None:
        return None
    what, direction = match.groups()
    if what in _A5_ERRORS:
        return ("errors", direction, _A5_ERRORS[what])
    return ("packets", direction, _A5_RENAMES.get(what, what))


NETWORK = PartKey("network", NetworkPart)  # its snapshot key
