"""The hccn_tool part of the snapshot (one PortSample per chip port), and the pure conversion
from parsed records to it, in base units (bits and bytes per second, watts, volts)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from exporter.core.snapshot import PartKey
from exporter.hccn import records as p
from exporter.hccn.records import NET_HEALTH_STATES

MEGABYTE = 1_000_000  # `MB/sec`: the tool does not say; network convention (10^6)
MEGABIT = 1_000_000
__all__ = ["NET_HEALTH_STATES", "NetworkCounter", "NetworkPart", "OpticalLaneSample", "PortSample", "classify_counters", "port_sample"]


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


def port_sample(npu: int, chip: int, device: int | None, port: str, readings: dict[str, object]) -> PortSample:
    """One PortSample from the latest fresh record of each command (base units)."""
    fields: dict[str, object] = {}
    link = readings.get("link")
    if isinstance(link, p.LinkStatus):
        fields["link_up"] = link.up
    stats = readings.get("link_stat")
    if isinstance(stats, p.LinkStats):
        fields["link_up_transitions"] = stats.up_count
        fields["link_down_transitions"] = stats.down_count
    speed = readings.get("speed")
    if isinstance(speed, p.Speed) and speed.megabits_per_second is not None:
        fields["speed_bytes_per_second"] = speed.megabits_per_second * MEGABIT / 8
    health = readings.get("net_health")
    if isinstance(health, p.NetHealth):
        fields["health"] = health.status
    bandwidth = readings.get("bandwidth")
    if isinstance(bandwidth, p.Bandwidth):
        fields["receive_bytes_per_second"] = bandwidth.rx_mb_per_second * MEGABYTE
        fields["transmit_bytes_per_second"] = bandwidth.tx_mb_per_second * MEGABYTE
    stat = readings.get("stat")
    if isinstance(stat, p.StatCounters):
        fields.update(classify_counters(stat.counters))
    optical = readings.get("optical")
    if isinstance(optical, p.OpticalInfo):
        fields.update(_optical(optical))
    ips = readings.get("ip")
    if isinstance(ips, tuple) and ips:
        fields["address"], fields["netmask"] = ips[0].address, ips[0].netmask
    return PortSample(npu=npu, chip=chip, device=device, port=port, **fields)  # type: ignore[arg-type]


def _optical(info: p.OpticalInfo) -> dict[str, object]:
    if info.present is False:
        return {"optical_present": False}  # an absent module prints NA (or stale) readings
    lanes = tuple(OpticalLaneSample(index, _watts(lane.tx_power_mw), _watts(lane.rx_power_mw)) for index, lane in info.lanes)
    return {
        "optical_present": info.present,
        "optical_temperature_celsius": info.temperature_celsius,
        "optical_voltage_volts": None if info.vcc_mv is None else info.vcc_mv / 1000.0,
        "optical_lanes": lanes,
    }


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


def classify_counters(counters: Iterable[tuple[str, int]]) -> dict[str, tuple[NetworkCounter, ...]]:
    """`-stat` key/values -> {"packets": ..., "errors": ..., "bytes": ...}; unknown keys dropped."""
    out: dict[str, dict[tuple[str, str], NetworkCounter]] = {"packets": {}, "errors": {}, "bytes": {}}
    for key, value in counters:
        found = _classify(key)
        if found is not None:
            family, direction, kind = found
            out[family].setdefault((direction, kind), NetworkCounter(direction, kind, value))  # one series each
    return {family: tuple(items.values()) for family, items in out.items()}


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
