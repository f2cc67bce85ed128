"""Typed records produced by the npu-smi parsers.

Values keep npu-smi's own units (MB, %, W, C, MHz) and say so in the field name; the
source converts them to the snapshot's base units. ``None`` means the tool printed no
value (absent column/key, ``-``, ``NA``, ``N/A``), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.core.errors import ReasonError


class NpuSmiError(ReasonError):
    """npu-smi printed an error, or text the parser cannot read.

    ``reason`` is a short label-safe kind used in self-metrics:
    ``dcmi_init_failed`` (-8005 and other dcmi init codes), ``device_busy`` (-8020),
    ``invalid_card_id``, ``invalid_type``, ``no_card``, ``no_chip``, ``not_supported``,
    ``garbled`` (no recognisable structure), ``truncated`` (structure cut short).
    """


# --- npu-smi info (overview table) -------------------------------------------------


@dataclass(frozen=True)
class InfoChip:
    """One chip (two table rows) of `npu-smi info`."""

    npu_id: int  # row 1 "NPU" / "NPU ID": the -i id
    chip_id: int  # row 2 "Chip" (0 on 950 V2, where the cell is blank)
    name: str  # row 1 "Name": 910B3, Ascend910, 310P3, Ascend950PR ...
    health: str | None  # "Health" as printed (OK, Warning, Alarm, Critical, UNKNOWN)
    power_watts: float | None  # "Power(W)"; NA on 310P, "-" on the 2nd A3 die
    temperature_celsius: float | None  # "Temp(C)"
    hugepages_used: int | None  # "Hugepages-Usage(page)" used / total
    hugepages_total: int | None
    bus_id: str | None  # "Bus-Id"; NA on SoC/EP boards
    aicore_percent: float | None  # "AICore(%)"
    npu_util_percent: float | None  # "NPU Util(%)" (950 V2 prints this instead of AICore)
    memory_used_mb: int | None  # "Memory-Usage(MB)" (DDR) used / total
    memory_total_mb: int | None
    hbm_used_mb: int | None  # "HBM-Usage(MB)" used / total; None where no column
    hbm_total_mb: int | None
    phy_id: int | None = None  # A3 row 2 "Phy-ID"
    logic_id: int | None = None  # 310/310P row 2 "Device" (logical device id)


@dataclass(frozen=True)
class InfoProcess:
    """One row of the process section of `npu-smi info`."""

    npu_id: int
    chip_id: int | None  # None on 950 V2 (first column is "NPU ID" only)
    pid: int  # "Process id"
    name: str  # "Process name" (may be empty)
    memory_mb: int | None  # "Process memory(MB)"
    container_pid: int | None = None  # 26.x "Process id in container"


@dataclass(frozen=True)
class InfoTable:
    """The whole `npu-smi info` output."""

    tool_version: str | None  # "npu-smi <x>"
    driver_version: str | None  # "Version: <y>"
    chips: tuple[InfoChip, ...]
    processes: tuple[InfoProcess, ...] | None  # None when no process section was printed
    idle_npus: tuple[int, ...] = ()  # "No running processes found in NPU <id>"
    driver_warning: bool = False  # the "[WARNING]The driver package may not be ..." line
    # Why the process section is unknown although every chip row is whole: the output ends
    # before it (where npu-smi always prints one) or inside it. ``processes`` is then None.
    process_error: str | None = None


# --- npu-smi info -m ------------------------------------------------------------


@dataclass(frozen=True)
class ChipMapEntry:
    """One row of `npu-smi info -m` (MCU and CPU rows included)."""

    npu_id: int
    chip_id: int
    logic_id: int | None  # "Chip Logic ID"; "-" for Mcu rows
    chip_name: str  # "Ascend 910B3", "Ascend910", "Mcu", "MiniD" ...
    phy_id: int | None = None  # A3/950 "Chip Phy-ID"
    slot_id: int | None = None  # 950 "Slot ID"

    @property
    def is_chip(self) -> bool:
        """False for the Mcu and CPU (3559) rows. 950 prints no logic id for its chips."""
        return self.chip_name.strip().lower() not in ("mcu", "3559")


# --- npu-smi info -t <type> -i <id> ----------------------------------------------------


@dataclass(frozen=True)
class ChipRecord:
    """Where a per-chip `-t` record was read: the NPU (the -i id) and its chip; the fields of
    each kind follow."""

    npu_id: int
    chip_id: int


@dataclass(frozen=True)
class ChipUsages(ChipRecord):
    """`-t usages`, one chip."""

    ddr_capacity_mb: int | None = None  # "DDR Capacity(MB)" / 310 "Memory Capacity(MB)"
    ddr_usage_percent: float | None = None  # "DDR Usage Rate(%)" / "Memory Usage Rate(%)"
    hugepages_total: int | None = None  # "(DDR) Hugepages Total(page)"
    hugepages_usage_percent: float | None = None
    hbm_capacity_mb: int | None = None  # "HBM Capacity(MB)"
    hbm_usage_percent: float | None = None  # "HBM Usage Rate(%)"
    aicore_percent: float | None = None  # "Aicore Usage Rate(%)"
    aivector_percent: float | None = None  # "Aivector Usage Rate(%)" / 310P "Vectorcore Usage Rate(%)"
    aicube_percent: float | None = None  # "Aicube Usage Rate(%)"
    aicpu_percent: float | None = None  # "Aicpu Usage Rate(%)"
    ctrlcpu_percent: float | None = None  # "Ctrlcpu Usage Rate(%)"
    ddr_bandwidth_percent: float | None = None  # "DDR/Memory Bandwidth Usage Rate(%)"
    hbm_bandwidth_percent: float | None = None  # "HBM Bandwidth Usage Rate(%)"
    npu_util_percent: float | None = None  # "NPU Utilization(%)"


@dataclass(frozen=True)
class ChipCommon(ChipRecord):
    """`-t common`, one chip."""

    memory_usage_percent: float | None = None  # "Memory Usage Rate(%)"
    hbm_usage_percent: float | None = None  # "HBM Usage Rate(%)"
    aicore_percent: float | None = None  # "Aicore Usage Rate(%)"
    aicore_freq_mhz: float | None = None  # "Aicore Freq(MHZ)" (rated)
    aicore_cur_freq_mhz: float | None = None  # "Aicore curFreq(MHZ)" (current)
    aicore_count: int | None = None  # "Aicore Count"
    temperature_celsius: float | None = None  # chip "Temperature(C)" (not the MCU's)
    power_watts: float | None = None  # "NPU Real-time Power(W)" in the chip block
    rated_power_watts: float | None = None  # "Rated Power Dissipation(W)" (310/310B)


@dataclass(frozen=True)
class CommonInfo:
    """`-t common` for one NPU: its chips and the MCU block."""

    npu_id: int
    chips: tuple[ChipCommon, ...]
    mcu_temperature_celsius: float | None = None
    mcu_power_watts: float | None = None  # 310P: the card power lives here


@dataclass(frozen=True)
class ChipMemory(ChipRecord):
    """`-t memory`, one chip."""

    ddr_capacity_mb: int | None = None  # "DDR Capacity(MB)" / 310 "Capacity(MB)"
    ddr_clock_mhz: float | None = None
    hbm_capacity_mb: int | None = None
    hbm_clock_mhz: float | None = None
    hbm_temperature_celsius: float | None = None  # "HBM Temperature(C)"
    hbm_manufacturer_id: str | None = None


@dataclass(frozen=True)
class ChipHealth:
    """`-t health`, one chip."""

    npu_id: int
    chip_id: int | None
    status: str | None  # "Health Status"
    error_codes: tuple[str, ...] = ()  # "Error Code", split on spaces; "0" / NA -> ()
    error_information: tuple[str, ...] = ()  # "Error Information" + continuation lines


@dataclass(frozen=True)
class ChipEcc(ChipRecord):
    """`-t ecc`, one chip. Counts as printed."""

    ddr_single_bit_errors: int | None = None
    ddr_double_bit_errors: int | None = None
    ddr_single_bit_aggregate_total: int | None = None
    ddr_double_bit_aggregate_total: int | None = None
    ddr_single_bit_isolated_pages: int | None = None
    ddr_double_bit_isolated_pages: int | None = None
    hbm_single_bit_errors: int | None = None
    hbm_double_bit_errors: int | None = None
    hbm_single_bit_aggregate_total: int | None = None
    hbm_double_bit_aggregate_total: int | None = None
    hbm_single_bit_isolated_pages: int | None = None
    hbm_double_bit_isolated_pages: int | None = None


@dataclass(frozen=True)
class BoardInfo:
    """`-t board -i N` (card, chip_id None) or `-t board -i N -c C` (chip)."""

    npu_id: int
    chip_id: int | None = None
    product_name: str | None = None
    model: str | None = None
    serial_number: str | None = None
    software_version: str | None = None
    firmware_version: str | None = None
    chip_name: str | None = None
    vdie_id: str | None = None  # "VDie ID" (910 family) or "Die ID"
    pcie_bus_info: str | None = None
    chip_count: int | None = None
    fields: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # every key/value as printed


# --- health and interconnect: `-t volt|pcie-err|err-count|sensors|sio-info|hccs|hccs-bw|spod-info` ---


@dataclass(frozen=True)
class ChipVoltage(ChipRecord):
    """`-t volt`, one chip (the MCU block of 310B is not a chip: left out)."""

    voltage_volts: float | None = None  # "Voltage(V)"; NA -> None


@dataclass(frozen=True)
class ChipPcieErrors(ChipRecord):
    """`-t pcie-err` (910B/A3/950, 310P cards) or `-t err-count` (Atlas 310 cards), one chip."""

    counts: tuple[tuple[str, int], ...] = ()  # (type, count): tx, rx, lcrc, ecrc, retry; 310-class pcs_rx, phy_lane, dl_lcrc, dl_dcrc


@dataclass(frozen=True)
class ChipSensors(ChipRecord):
    """`-t sensors`, one chip: the readings printed, NA left out."""

    temperatures: tuple[tuple[str, float], ...] = ()  # (sensor, celsius): soc_max, sfp, ndie, hbm


@dataclass(frozen=True)
class ChipSio(ChipRecord):
    """`-t sio-info`, one chip: die-to-die (SIO) link CRC errors."""

    tx_errors: int | None = None  # "TX Error Count"
    rx_errors: int | None = None  # "RX Error Count"


@dataclass(frozen=True)
class HccsLink:
    """One HCCS link of `-t hccs -c`: the link is its position in npu-smi's bracketed lists."""

    link: int
    lane_mode: int | None = None  # "hccs lane mode": lanes in use (0, 1, 2, 4)
    lane_list: str | None = None  # "hccs link lane list": one 0/1 digit per lane
    speed_gbps: int | None = None  # "hccs link speed": lane mode x 56 Gbit/s
    tx_packets: int | None = None
    tx_bytes: int | None = None  # npu-smi prints packets x 20
    rx_packets: int | None = None
    rx_bytes: int | None = None
    retries: int | None = None  # "hccs retry count"
    errors: int | None = None  # "hccs error count" (CRC errors)


@dataclass(frozen=True)
class ChipHccs(ChipRecord):
    """`-t hccs -i N -c C`, one chip (310P prints counters only: no health, lanes or speed)."""

    healthy: bool | None = None  # "hccs health status": OK -> True, NOK -> False
    first_error_lane: int | None = None  # "hccs first error lane"; NA -> None
    links: tuple[HccsLink, ...] = ()


@dataclass(frozen=True)
class ChipHccsBandwidth(ChipRecord):
    """`-t hccs-bw -i N -c C -time MS`: the table's rows, ``total`` left out."""

    links: tuple[tuple[int, float, float], ...] = ()  # (link by row position, tx GB/s, rx GB/s)


@dataclass(frozen=True)
class SuperPod(ChipRecord):
    """`-t spod-info -i N -c C`: where the chip sits in an A3/950 super pod."""

    sdid: int | None = None  # "SDID": the super-pod device id
    super_pod_size: int | None = None
    super_pod_id: int | None = None
    server_index: int | None = None
    chassis_id: int | None = None  # 950 only
    super_pod_type: str | None = None  # 950 only
