"""The immutable snapshot collectors render: built by the sampler, never read live.

Base units (bytes, watts, hertz, ratios 0..1); ``None`` means not reported by this
chip/driver, which is different from zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True)
class EccCount:
    memory: str        # hbm, ddr
    type: str          # single_bit, double_bit
    count: int


@dataclass(frozen=True)
class ChipSample:
    """One chip. Field comments name the npu-smi command and column it comes from."""

    npu: int                                     # `info` NPU id (the -i argument)
    chip: int                                    # `info` Chip: index within the card
    device: int | None                           # `info -m` Chip Logic ID (framework index)
    observed_at: float                           # time.monotonic() of the `info` read that saw it (ages only, never exported)
    up: bool                                     # the latest `info` listed this chip
    model: str | None = None                     # `info` Name
    bus_id: str | None = None                    # `info` Bus-Id
    phy_id: int | None = None                    # `info` / `info -m` Chip Phy-ID (A3)
    vdie_id: str | None = None                   # `-t board -c` VDie ID
    health: str | None = None                    # `info` Health, normalised to metrics.HEALTH_STATES
    health_error_codes: tuple[str, ...] = ()     # `-t health -c` Error Code (read only when health is not OK)
    aicore_utilization_ratio: float | None = None        # `info` AICore(%)
    aivector_utilization_ratio: float | None = None      # `-t usages` Aivector/Vectorcore Usage Rate(%)
    aicube_utilization_ratio: float | None = None        # `-t usages` Aicube Usage Rate(%)
    aicpu_utilization_ratio: float | None = None         # `-t usages` Aicpu Usage Rate(%)
    ctrlcpu_utilization_ratio: float | None = None       # `-t usages` Ctrlcpu Usage Rate(%)
    npu_utilization_ratio: float | None = None           # `-t usages` NPU Utilization(%), 950 `info` NPU Util(%)
    hbm_used_bytes: float | None = None                  # `info` HBM-Usage(MB) used
    hbm_total_bytes: float | None = None                 # `info` HBM-Usage(MB) total
    hbm_bandwidth_utilization_ratio: float | None = None  # `-t usages` HBM Bandwidth Usage Rate(%)
    memory_used_bytes: float | None = None               # `info` Memory-Usage(MB) used (DDR)
    memory_total_bytes: float | None = None              # `info` Memory-Usage(MB) total
    ddr_bandwidth_utilization_ratio: float | None = None  # `-t usages` DDR Bandwidth Usage Rate(%)
    hugepages_used: int | None = None                    # `info` Hugepages-Usage(page) used
    hugepages_total: int | None = None                   # `info` Hugepages-Usage(page) total
    power_watts: float | None = None                     # `info` Power(W); 310P: `-t common` MCU power
    temperature_celsius: float | None = None             # `info` Temp(C)
    hbm_temperature_celsius: float | None = None         # `-t memory` HBM Temperature(C)
    aicore_frequency_hertz: float | None = None          # `-t common` Aicore curFreq(MHZ)
    aicore_rated_frequency_hertz: float | None = None    # `-t common` Aicore Freq(MHZ)
    voltage_volts: float | None = None
    ecc: tuple[EccCount, ...] = ()                       # `-t ecc` aggregate totals


@dataclass(frozen=True)
class ProcessSample:
    """One row of the `info` process section."""

    npu: int
    chip: int
    device: int | None
    pid: int
    name: str
    memory_bytes: float | None


@dataclass(frozen=True)
class DevicesPart:
    """What the npu-smi source knows at one moment."""

    chips: tuple[ChipSample, ...] = ()
    processes: tuple[ProcessSample, ...] = ()
    processes_observed_at: float = 0.0
    chips_seen: int | None = None                # chips in the latest successful overview
    driver_version: str | None = None
    tool_version: str | None = None


@dataclass(frozen=True)
class NetworkCounter:
    """One cumulative hccn_tool `-stat` counter, classified for the metric labels."""

    direction: str     # rx, tx, or "" where the counter has none
    kind: str          # pfc, pause, roce, cnp, fcs, bad_packets, ... (sources/hccn.py tables)
    value: int


@dataclass(frozen=True)
class OpticalLaneSample:
    lane: int
    tx_power_watts: float | None = None   # `-optical` Tx PowerN (mW) / A5 TxPower LaneN (dBm)
    rx_power_watts: float | None = None


@dataclass(frozen=True)
class PortSample:
    """One network port of a chip (hccn_tool). Field comments name the command it comes from."""

    npu: int
    chip: int
    device: int | None
    port: str                                    # "" for a chip's only port; A5 "<udie>/<port>"
    observed_at: float                           # unix time of the newest successful read
    link_up: bool | None = None                  # `-link` link status
    link_up_transitions: int | None = None       # `-link_stat` link up count
    link_down_transitions: int | None = None     # `-link_stat` link down count (newer drivers)
    speed_bits_per_second: float | None = None   # `-speed` (None: Unknown!, link down)
    health: str | None = None                    # `-net_health`, parsers.hccn.NET_HEALTH_STATES
    receive_bytes_per_second: float | None = None   # `-bandwidth` RX
    transmit_bytes_per_second: float | None = None  # `-bandwidth` TX
    packets: tuple[NetworkCounter, ...] = ()     # `-stat` packet counters
    errors: tuple[NetworkCounter, ...] = ()      # `-stat` error counters
    bytes: tuple[NetworkCounter, ...] = ()       # `-stat` *_oct_num byte counters
    optical_present: bool | None = None          # `-optical` present
    optical_temperature_celsius: float | None = None
    optical_voltage_volts: float | None = None   # `-optical` Vcc (mV)
    optical_lanes: tuple[OpticalLaneSample, ...] = ()
    address: str | None = None                   # `-ip` ipaddr
    netmask: str | None = None


@dataclass(frozen=True)
class SourceStatus:
    """Health of one source (one scheduled task) as of its latest run."""

    name: str
    runs: int = 0
    success: bool = False
    duration_seconds: float | None = None
    last_success_timestamp: float | None = None
    errors: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Snapshot:
    captured_at: float
    devices: DevicesPart = DevicesPart()
    sources: tuple[SourceStatus, ...] = ()
    ready: bool = False                          # every enabled source has run at least once
    simulated: tuple[str, str] | None = None     # (scenario, model) when running on the simulator
    profiles: tuple[Any, ...] = ()               # parsers.profiles.ProfileSummary, latest per job and rank
    network: tuple[PortSample, ...] = ()         # hccn_tool, per chip port (sources/hccn.py)
