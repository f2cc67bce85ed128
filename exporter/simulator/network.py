"""Network state of a simulated node: what hccn_tool reports for each chip's RoCE port.

Pure like scenarios.simulate: every value is a function of (model, scenario, t, chip, seed).
Counters only grow (constant rates since ECC_EPOCH, counted over the time the link was up).
Scenarios (chips by logic id):

- the npu-smi scenarios: every link up at 200 Gb/s, net health Success, optics in range,
  traffic following the chip's AI Core load; ``degraded`` also gives logic id 2 (its
  Critical chip) net health ``Fault``, growing RoCE errors/retries and a dark receive lane,
  and its missing NPU answers "The device is not exist!";
- ``link-flap``: chip load as ``healthy``; the link of logic id 0 (LINK_FLAP_LOGIC_ID) is down
  for the last FLAP_DOWN_S seconds of every FLAP_PERIOD_S (link_stat counts every change,
  speed Unknown!, net health Receive timeout, no traffic, FCS/RoCE errors per flap) and its
  module receives weakly (below the RxPower low threshold) - the usual cause.

The 310P model (inference cards) has no RoCE ports: every command is unsupported.
Standard library only.
"""

from __future__ import annotations

from exporter.simulator.models import FAMILY_310P, NodeModel
from exporter.simulator.record import Record
from exporter.simulator.scenarios import (
    ECC_EPOCH,
    SCENARIOS,
    NodeState,
    simulate,
    smooth_noise,
    unit_noise,
)

NETWORK_SCENARIOS: tuple[str, ...] = ("link-flap",)
ALL_SCENARIOS: tuple[str, ...] = SCENARIOS + NETWORK_SCENARIOS

LINK_FLAP_LOGIC_ID = 0
FLAP_PERIOD_S = 120.0
FLAP_DOWN_S = 30.0
DEGRADED_NETWORK_LOGIC_ID = 2  # the degraded scenario's Critical chip
DARK_LANE = 1  # its receive lane that lost light
MAX_RECORDS = 10  # LINK_STAT_MAX_IDX

SPEED_MBPS = 200_000  # 200GE RoCE ports on 910B/A3
PEAK_MB_PER_S = 6_000.0  # per direction at 100 % AI Core load
IDLE_BYTES_PER_S = 2_000.0  # LLDP, ARP, probes
PACKET_BYTES = 4_096  # RoCE MTU-sized frames

# Thresholds as the module prints them (optical__910A__1__mangled).
VCC_HIGH_MV, VCC_LOW_MV = 3465.0, 3135.0
TEMP_HIGH_C, TEMP_LOW_C = 70, 0
TX_POWER_HIGH_MW, TX_POWER_LOW_MW = 3.5481, 0.2818
RX_POWER_HIGH_MW, RX_POWER_LOW_MW = 3.5481, 0.1445
WEAK_RX_MW = 0.1202  # link-flap module: below RX_POWER_LOW_MW
DARK_RX_MW = 0.0054

# `-stat -g` keys in print order (910B build with HCCN_TOOL_SHOW_EXT_STAT: 48 counters).
STAT_KEYS: tuple[str, ...] = (
    "mac_tx_mac_pause_num",
    "mac_rx_mac_pause_num",
    "mac_tx_pfc_pkt_num",
    *(f"mac_tx_pfc_pri{n}_pkt_num" for n in range(8)),
    "mac_rx_pfc_pkt_num",
    *(f"mac_rx_pfc_pri{n}_pkt_num" for n in range(8)),
    "mac_tx_total_pkt_num",
    "mac_tx_total_oct_num",
    "mac_tx_bad_pkt_num",
    "mac_tx_bad_oct_num",
    "mac_rx_total_pkt_num",
    "mac_rx_total_oct_num",
    "mac_rx_bad_pkt_num",
    "mac_rx_bad_oct_num",
    "mac_rx_fcs_err_pkt_num",
    "roce_rx_rc_pkt_num",
    "roce_rx_all_pkt_num",
    "roce_rx_err_pkt_num",
    "roce_tx_rc_pkt_num",
    "roce_tx_all_pkt_num",
    "roce_tx_err_pkt_num",
    "roce_cqe_num",
    "roce_rx_cnp_pkt_num",
    "roce_tx_cnp_pkt_num",
    "roce_unexpected_ack_num",
    "roce_out_of_order_num",
    "roce_verification_err_num",
    "roce_qp_status_err_num",
    "roce_new_pkt_rty_num",
    "roce_ecn_db_num",
    "nic_tx_all_pkg_num",
    "nic_tx_all_oct_num",
    "nic_rx_all_pkg_num",
    "nic_rx_all_oct_num",
)
ROCE_PRIORITY = 3  # the PFC priority RoCE traffic uses by default


class LinkEvent(Record):
    t: float
    up: bool


class OpticalState(Record):
    present: bool
    temperature_celsius: int
    vcc_mv: float
    tx_power_mw: tuple[float, ...]  # lanes 0..3
    rx_power_mw: tuple[float, ...]
    tx_bias_ma: tuple[float, ...]
    rx_los_flags: int
    media_snr_db: tuple[float, ...]
    serial_number: str
    vendor_name: str = "Hisense"
    part_number: str = "LMQ8611-PC+"
    org_unique_id: str = "0xac 0x4a 0x0"
    identifier: str = "QSFP28 or later"
    wavelength_nm: int = 850
    date_code: str = "2023.6.18"


class PortState(Record):
    """One chip's RoCE port as hccn_tool reports it."""

    npu_id: int
    chip_id: int
    logic_id: int
    tool_id: int  # the -i hccn_tool answers to (phy id; logic id on 910B)
    link_up: bool
    up_count: int
    down_count: int
    events: tuple[LinkEvent, ...]  # newest first, at most MAX_RECORDS
    speed_mbps: int | None  # None: "Speed: Unknown!"
    net_health: str
    counters: tuple[tuple[str, int], ...]
    tx_centi_mb_per_s: int  # bandwidth in 1/100 MB/s, as the driver hands it over
    rx_centi_mb_per_s: int
    optical: OpticalState
    address: str
    netmask: str


class NetworkState(Record):
    model: NodeModel
    scenario: str
    t: float
    ports: tuple[PortState, ...]  # present chips only
    missing_ids: tuple[int, ...]  # tool ids of chips gone from the bus
    supported: bool  # False: the product has no RoCE ports (310P)

    def port(self, tool_id: int) -> PortState | None:
        return next((p for p in self.ports if p.tool_id == tool_id), None)


def chip_scenario(scenario: str) -> str:
    """The npu-smi scenario that drives the chips' load under a network scenario."""
    return "healthy" if scenario in NETWORK_SCENARIOS else scenario


def simulate_network(model: NodeModel, scenario: str, t: float, seed: int = 0) -> NetworkState:
    if scenario not in ALL_SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {', '.join(ALL_SCENARIOS)}")
    chips = simulate(model, chip_scenario(scenario), t, seed)
    ports = tuple(_port(model, scenario, chips, chip.logic_id, t, seed) for chip in chips.chips)
    missing = tuple(_tool_id(s.phy_id, s.logic_id) for s in model.chips if (s.npu_id, s.chip_id) in chips.missing)
    return NetworkState(model, scenario, t, ports, missing, supported=model.family != FAMILY_310P)


def _tool_id(phy_id: int | None, logic_id: int) -> int:
    return logic_id if phy_id is None else phy_id


# --- noise: scenarios.py's, under a key of its own so ports do not echo their chips ------------


def _unit(*key: object) -> float:
    return unit_noise("net", *key)


def _smooth(t: float, period: float, *key: object) -> float:
    return smooth_noise(t, period, "net", *key)


# --- link history ---------------------------------------------------------------------------


def _flaps(scenario: str, logic_id: int) -> bool:
    return scenario == "link-flap" and logic_id == LINK_FLAP_LOGIC_ID


def _link(flapping: bool, t: float) -> tuple[bool, int, int, tuple[LinkEvent, ...], float]:
    """(up now, up count, down count, newest events, seconds up since the epoch)."""
    elapsed = max(0.0, t - ECC_EPOCH)
    boot = LinkEvent(ECC_EPOCH, True)
    if not flapping:
        return True, 1, 0, (boot,), elapsed
    cycles, phase = divmod(elapsed, FLAP_PERIOD_S)
    up_span = FLAP_PERIOD_S - FLAP_DOWN_S
    up = phase < up_span
    downs = int(cycles) + (0 if up else 1)
    ups = 1 + int(cycles)
    events: list[LinkEvent] = []
    cycle = int(cycles)
    while len(events) < MAX_RECORDS and cycle >= 0:
        start = ECC_EPOCH + cycle * FLAP_PERIOD_S
        for event in (LinkEvent(start + up_span, False), LinkEvent(start, True)):
            if event.t <= t and len(events) < MAX_RECORDS:
                events.append(event)
        cycle -= 1
    up_seconds = cycles * up_span + min(phase, up_span)
    return up, ups, downs, tuple(events), up_seconds


# --- one port -------------------------------------------------------------------------------


def _port(model: NodeModel, scenario: str, chips: NodeState, logic_id: int, t: float, seed: int) -> PortState:
    chip = next(c for c in chips.chips if c.logic_id == logic_id)
    flapping = _flaps(scenario, logic_id)
    faulty = scenario == "degraded" and logic_id == DEGRADED_NETWORK_LOGIC_ID
    up, ups, downs, events, up_seconds = _link(flapping, t)
    busy = chip_scenario(scenario) != "idle"
    health = "Success"
    if faulty:
        health = "Fault"
    elif not up:
        health = "Receive timeout"
    load = chip.aicore_percent / 100.0 if up else 0.0
    tx = round(100 * PEAK_MB_PER_S * load * (1.0 + 0.03 * _smooth(t, 4.0, seed, logic_id, "tx"))) if busy else 0
    rx = round(100 * PEAK_MB_PER_S * load * (1.0 + 0.03 * _smooth(t, 4.0, seed, logic_id, "rx"))) if busy else 0
    return PortState(
        npu_id=chip.npu_id,
        chip_id=chip.chip_id,
        logic_id=logic_id,
        tool_id=_tool_id(chip.phy_id, logic_id),
        link_up=up,
        up_count=ups,
        down_count=downs,
        events=events,
        speed_mbps=SPEED_MBPS if up else None,
        net_health=health,
        counters=_counters(busy, faulty, downs, up_seconds, seed, logic_id),
        tx_centi_mb_per_s=max(0, tx),
        rx_centi_mb_per_s=max(0, rx),
        optical=_optical(model, scenario, logic_id, faulty, flapping, t, seed),
        address=f"192.168.{100 + logic_id // 200}.{10 + logic_id % 200}",
        netmask="255.255.255.0",
    )


def _counters(busy: bool, faulty: bool, downs: int, up_seconds: float, seed: int, logic_id: int) -> tuple[tuple[str, int], ...]:
    """Cumulative `-stat` counters: constant rates over the time the link was up."""
    share = 0.55 if busy else 0.0
    byte_rate = PEAK_MB_PER_S * 1e6 * share + IDLE_BYTES_PER_S
    skew = 1.0 + 0.05 * _unit(seed, logic_id, "skew")
    tx_bytes = int(byte_rate * skew * up_seconds)
    rx_bytes = int(byte_rate * up_seconds)
    tx_pkts, rx_pkts = tx_bytes // PACKET_BYTES, rx_bytes // PACKET_BYTES
    pfc_tx, pfc_rx = (int(2.0 * up_seconds), int(3.0 * up_seconds)) if busy else (0, 0)
    roce_errors = int(5.0 * up_seconds) if faulty else 0
    values = {
        "mac_tx_pfc_pkt_num": pfc_tx,
        f"mac_tx_pfc_pri{ROCE_PRIORITY}_pkt_num": pfc_tx,
        "mac_rx_pfc_pkt_num": pfc_rx,
        f"mac_rx_pfc_pri{ROCE_PRIORITY}_pkt_num": pfc_rx,
        "mac_tx_total_pkt_num": tx_pkts,
        "mac_tx_total_oct_num": tx_bytes,
        "mac_rx_total_pkt_num": rx_pkts,
        "mac_rx_total_oct_num": rx_bytes,
        "mac_rx_fcs_err_pkt_num": 20 * downs,
        "roce_rx_rc_pkt_num": rx_pkts * 49 // 50,
        "roce_rx_all_pkt_num": rx_pkts * 49 // 50,
        "roce_rx_err_pkt_num": roce_errors + 20 * downs,
        "roce_tx_rc_pkt_num": tx_pkts * 49 // 50,
        "roce_tx_all_pkt_num": tx_pkts * 49 // 50,
        "roce_cqe_num": (rx_pkts + tx_pkts) // 64,
        "roce_rx_cnp_pkt_num": int(0.5 * up_seconds) if busy else 0,
        "roce_tx_cnp_pkt_num": int(0.5 * up_seconds) if busy else 0,
        "roce_out_of_order_num": int(2.0 * up_seconds) if faulty else 0,
        "roce_new_pkt_rty_num": roce_errors,
        "roce_ecn_db_num": int(0.2 * up_seconds) if busy else 0,
        "nic_tx_all_pkg_num": int(8.0 * up_seconds),
        "nic_tx_all_oct_num": int(8.0 * 180 * up_seconds),
        "nic_rx_all_pkg_num": int(12.0 * up_seconds),
        "nic_rx_all_oct_num": int(12.0 * 150 * up_seconds),
    }
    return tuple((key, values.get(key, 0)) for key in STAT_KEYS)


def _optical(model: NodeModel, scenario: str, logic_id: int, faulty: bool, flapping: bool, t: float, seed: int) -> OpticalState:
    load = 0.0 if chip_scenario(scenario) == "idle" else 1.0
    temperature = round(40.0 + 6.0 * load + 2.0 * _smooth(t, 60.0, seed, logic_id, "otemp"))
    tx = tuple(
        round(1.30 + 0.25 * _unit(seed, logic_id, lane, "tx") + 0.02 * _smooth(t, 30.0, seed, logic_id, lane, "txn"), 4)
        for lane in range(4)
    )
    rx = [
        round(0.95 + 0.20 * _unit(seed, logic_id, lane, "rx") + 0.02 * _smooth(t, 30.0, seed, logic_id, lane, "rxn"), 4)
        for lane in range(4)
    ]
    los = 0
    if flapping:
        rx = [WEAK_RX_MW] * 4
    if faulty:
        rx[DARK_LANE] = DARK_RX_MW
        los = 1 << DARK_LANE
    return OpticalState(
        present=True,
        temperature_celsius=temperature,
        vcc_mv=round(3280.0 + 15.0 * _smooth(t, 45.0, seed, logic_id, "vcc"), 2),
        tx_power_mw=tx,
        rx_power_mw=tuple(rx),
        tx_bias_ma=tuple(round(7.90 + 0.05 * _unit(seed, logic_id, lane, "bias"), 4) for lane in range(4)),
        rx_los_flags=los,
        media_snr_db=tuple(round(22.0 + 1.5 * _unit(seed, logic_id, lane, "snr"), 4) for lane in range(4)),
        serial_number=f"V8BD{int(_unit(model.name, logic_id, 'serial') * 1e7):07d}",
    )
