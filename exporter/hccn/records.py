"""Typed records of hccn_tool's outputs, and its one error type.

Where the 910B/A3 and 950/A5 builds differ in units the parser converts to the 910B ones (Mb/s,
mW) so that one record type serves both; everything else keeps the tool's units and says so in
the field name. ``None`` means "printed no reading" (`NA`, `Unknown!`, `not supported`, `get
failed`), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.errors import ReasonError


class HccnError(ReasonError):
    """hccn_tool reported an error, or printed text the parser cannot read.

    ``reason`` is a short label-safe kind for self-metrics: ``busy``, ``permission_denied``,
    ``not_supported``, ``optical_not_present``, ``optical_initializing``,
    ``invalid_device_id``, ``no_device``, ``device_unhealthy``, ``no_ip``, ``link_down``,
    ``control_link_unreachable``, ``bad_option``, ``timeout``, ``command_failed``,
    ``exit_status`` (non-zero exit, unknown text) or ``garbled`` (no recognisable structure).
    ``code`` is the exit status when one was seen.
    """


@dataclass(frozen=True)
class LinkStatus:
    """`-link -g`: ``link status: UP|DOWN``."""

    up: bool


@dataclass(frozen=True)
class LinkRecord:
    """One `-link_stat` change record, newest first in the output."""

    timestamp: str  # C asctime, whitespace collapsed (host local time, no zone)
    up: bool  # LINK UP / LINK_UP


@dataclass(frozen=True)
class LinkStats:
    """`-link_stat -g`: cumulative flap counters since driver load or `-link_stat -c`."""

    up_count: int  # "link up count"
    down_count: int | None  # "link down count": newer drivers and A5 only
    records: tuple[LinkRecord, ...] = ()
    current_time: str | None = None  # 910B "current time" line


@dataclass(frozen=True)
class Speed:
    """`-speed -g`: 910B ``Speed: %d Mb/s``, A5 table column Speed ``400 G``."""

    megabits_per_second: float | None  # None: "Unknown!" / NA (typically link down)


# g_net_health_status (910B and 950 print the same table); matched by prefix, case-folded,
# because older drivers print "Socket failed" for "Socket fail".
NET_HEALTH_STATES = (
    "Success",
    "Socket fail",
    "Receive timeout",
    "Unreachable",
    "Time exceeded",
    "Fault",
    "Init",
    "Thread error",
    "Detect ip set",
    "Unknown",
)


@dataclass(frozen=True)
class NetHealth:
    """`-net_health -g`: ``net health status: <str>``."""

    status: str  # one of NET_HEALTH_STATES ("Unknown" for unlisted text)
    printed: str  # the text as printed


@dataclass(frozen=True)
class StatCounters:
    """`-stat -g`: every ``key:value`` counter in printed order (unknown keys kept)."""

    counters: tuple[tuple[str, int], ...]

    def as_dict(self) -> dict[str, int]:
        return dict(self.counters)


@dataclass(frozen=True)
class OpticalLane:
    tx_power_mw: float | None = None  # 910B "Tx PowerN" mW; A5 "TxPower LaneN(dBm)" converted
    rx_power_mw: float | None = None
    tx_bias_ma: float | None = None  # "Tx BiasN" / A5 "Bias LaneN(mA)"


@dataclass(frozen=True)
class OpticalInfo:
    """`-optical -g`. ``lanes`` maps lane index -> readings (DR4 lanes 2-3 print NA)."""

    present: bool | None  # "present : present | not present"
    temperature_celsius: float | None = None
    vcc_mv: float | None = None  # "Vcc" in mV
    lanes: tuple[tuple[int, OpticalLane], ...] = ()
    temperature_high_celsius: float | None = None  # "Temp High Thres" / "Temp Low Thres"
    temperature_low_celsius: float | None = None
    vcc_high_mv: float | None = None
    vcc_low_mv: float | None = None
    tx_power_high_mw: float | None = None
    tx_power_low_mw: float | None = None
    rx_power_high_mw: float | None = None
    rx_power_low_mw: float | None = None
    tx_los_flags: int | None = None  # bitmask per lane
    rx_los_flags: int | None = None
    vendor_name: str | None = None
    part_number: str | None = None
    identifier: str | None = None  # "xsfp identifier"

    def lane(self, index: int) -> OpticalLane | None:
        return dict(self.lanes).get(index)


@dataclass(frozen=True)
class Bandwidth:
    """`-bandwidth -g`: throughput over the tool's measuring window, MB/sec as printed."""

    tx_mb_per_second: float
    rx_mb_per_second: float


@dataclass(frozen=True)
class IpConfig:
    """`-ip -g`: one ``ipaddr:``/``netmask:`` pair (repeated per port on multi-port chips)."""

    address: str
    netmask: str | None


@dataclass(frozen=True)
class PortInfo:
    """A5 `-dev_info -g`, first table (by column position: header text varies)."""

    udie: int
    port: int
    speed_gbps: int | None
    port_type: str  # UB, ETH
    link_up: bool | None
    media: str | None
