"""The npu-smi part of the snapshot, and the pure conversion from parsed records to it.

Base units (bytes, watts, hertz, ratios 0..1); ``None`` means not reported by this chip or
driver, which is different from zero. A field's comment names the npu-smi command and
column it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core import faultlevels
from exporter.core.snapshot import PartKey
from exporter.npusmi import parse as p
from exporter.npusmi.faultcodes import FaultCodeTable

MIB = 1024 * 1024  # npu-smi's "MB" are MiB
HEALTH_STATES = ("OK", "Warning", "Alarm", "Critical", "Unknown")


@dataclass(frozen=True)
class EccCount:
    memory: str  # hbm, ddr
    type: str  # single_bit, double_bit
    count: int


@dataclass(frozen=True)
class FaultCode:
    code: str  # as npu-smi prints it in `-t health` (upper-case hex, no 0x)
    level: str  # its handling level in the fault-code table, `unknown` when unlisted


@dataclass(frozen=True)
class ChipSample:
    """One chip as the latest fresh reads describe it."""

    npu: int  # `info` NPU id (the -i argument)
    chip: int  # `info` Chip: index within the card
    device: int | None  # `info -m` Chip Logic ID (framework index)
    up: bool  # listed by the latest `info`, which is fresh
    model: str | None = None  # `info` Name
    bus_id: str | None = None  # `info` Bus-Id
    phy_id: int | None = None  # `info` / `info -m` Chip Phy-ID (A3)
    vdie_id: str | None = None  # `-t board -c` VDie ID
    health: str | None = None  # `info` Health, one of HEALTH_STATES
    health_errors: tuple[FaultCode, ...] = ()  # `-t health -c` Error Code (only when health is not OK) and `-t current-fault-event` ids
    fault_level: str | None = None  # the most severe level of health_errors (core/faultlevels.py); None: codes not read
    aicore_utilization_ratio: float | None = None  # `info` AICore(%)
    aivector_utilization_ratio: float | None = None  # `-t usages` Aivector/Vectorcore Usage Rate(%)
    aicube_utilization_ratio: float | None = None  # `-t usages` Aicube Usage Rate(%)
    aicpu_utilization_ratio: float | None = None  # `-t usages` Aicpu Usage Rate(%)
    ctrlcpu_utilization_ratio: float | None = None  # `-t usages` Ctrlcpu Usage Rate(%)
    npu_utilization_ratio: float | None = None  # `-t usages` NPU Utilization(%), 950 `info` NPU Util(%)
    hbm_used_bytes: float | None = None  # `info` HBM-Usage(MB) used
    hbm_total_bytes: float | None = None  # `info` HBM-Usage(MB) total
    hbm_bandwidth_utilization_ratio: float | None = None  # `-t usages` HBM Bandwidth Usage Rate(%)
    memory_used_bytes: float | None = None  # `info` Memory-Usage(MB) used (DDR)
    memory_total_bytes: float | None = None  # `info` Memory-Usage(MB) total
    ddr_bandwidth_utilization_ratio: float | None = None  # `-t usages` DDR Bandwidth Usage Rate(%)
    hugepages_used: int | None = None  # `info` Hugepages-Usage(page) used
    hugepages_total: int | None = None  # `info` Hugepages-Usage(page) total
    power_watts: float | None = None  # `info` Power(W); 310P: `-t common` MCU power
    peak_flops: tuple[tuple[str, float], ...] = ()  # (precision, FLOP/s) of the model: npusmi/peak_flops.yaml + npu_smi.peak_flops
    energy_joules: float | None = None  # power_watts integrated over this process's reads (npusmi/energy.py)
    temperature_celsius: float | None = None  # `info` Temp(C)
    hbm_temperature_celsius: float | None = None  # `-t memory` HBM Temperature(C)
    aicore_frequency_hertz: float | None = None  # `-t common` Aicore curFreq(MHZ)
    aicore_rated_frequency_hertz: float | None = None  # `-t common` Aicore Freq(MHZ)
    ecc: tuple[EccCount, ...] = ()  # `-t ecc` Error Count (since last cleared)
    ecc_aggregate: tuple[EccCount, ...] = ()  # `-t ecc` Aggregate Total Err Cnt (lifetime)
    ecc_isolated_pages: tuple[EccCount, ...] = ()  # `-t ecc` Isolated Pages Count
    voltage_volts: float | None = None  # `-t volt -c` Voltage(V)
    pcie_errors: tuple[tuple[str, int], ...] = ()  # `-t pcie-err -c` / `err-count`: (type, count)
    # `-t sensors -c`: (sensor, celsius) for soc_max, sfp, ndie; its HBM reading is hbm_temperature_celsius
    sensor_temperatures: tuple[tuple[str, float], ...] = ()
    hccs_healthy: bool | None = None  # `-t hccs -c` hccs health status (OK / NOK)
    hccs_links: tuple[p.HccsLink, ...] = ()  # `-t hccs -c` per-link lists
    hccs_bandwidth: tuple[tuple[int, str, float], ...] = ()  # `-t hccs-bw -c`: (link, tx|rx, bytes per second)
    sio_errors: tuple[tuple[str, int], ...] = ()  # `-t sio-info -c`: (tx|rx, count)
    superpod: p.SuperPod | None = None  # `-t spod-info -c` (inventory)


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
    """What the npu-smi source knows at one moment; data older than max_age is left out."""

    chips: tuple[ChipSample, ...] = ()  # every chip ever seen; those not read now have up=False
    processes: tuple[ProcessSample, ...] = ()
    chips_seen: int | None = None  # chips in the latest successful overview
    driver_version: str | None = None  # `info` Version
    tool_version: str | None = None  # `info` npu-smi version
    stale_chips: int = 0  # listed by an overview older than max_age: withheld
    expected_devices: int | None = None  # npu_smi.expected_devices (None: not set)
    pci_expected_devices: int | None = None  # chips the Ascend PCI functions in sysfs carry (npusmi/pci.py)
    pci_functions: tuple[tuple[str, int], ...] = ()  # (PCI device id, Ascend functions with it) in sysfs
    energy_skipped_intervals: int = 0  # power-read intervals too long to integrate (npusmi/energy.py)


# --- records -> samples (pure) ------------------------------------------------------------------


def overview_values(chip: p.InfoChip) -> dict[str, object]:
    """ChipSample fields from the chip's rows of `npu-smi info`."""
    ddr = has_ddr(chip)
    return {
        "health": health_state(chip.health),
        "aicore_utilization_ratio": ratio(chip.aicore_percent),
        "npu_utilization_ratio": ratio(chip.npu_util_percent),
        "hbm_used_bytes": to_bytes(chip.hbm_used_mb),
        "hbm_total_bytes": to_bytes(chip.hbm_total_mb),
        "memory_used_bytes": to_bytes(chip.memory_used_mb) if ddr else None,
        "memory_total_bytes": to_bytes(chip.memory_total_mb) if ddr else None,
        "hugepages_used": chip.hugepages_used,
        "hugepages_total": chip.hugepages_total,
        "power_watts": chip.power_watts,
        "temperature_celsius": chip.temperature_celsius,
    }


def detail_values(sample: ChipSample, details: dict[str, object]) -> dict[str, object]:
    """ChipSample fields from the chip's fresh `-t` records, by kind (usages, common, ...)."""
    changes: dict[str, object] = {}
    usages = details.get("usages")
    if isinstance(usages, p.ChipUsages):
        changes.update(
            aivector_utilization_ratio=ratio(usages.aivector_percent),
            aicube_utilization_ratio=ratio(usages.aicube_percent),
            aicpu_utilization_ratio=ratio(usages.aicpu_percent),
            ctrlcpu_utilization_ratio=ratio(usages.ctrlcpu_percent),
            hbm_bandwidth_utilization_ratio=ratio(usages.hbm_bandwidth_percent),
        )
        if sample.memory_total_bytes is not None:
            changes["ddr_bandwidth_utilization_ratio"] = ratio(usages.ddr_bandwidth_percent)
        if sample.npu_utilization_ratio is None:
            changes["npu_utilization_ratio"] = ratio(usages.npu_util_percent)
    common = details.get("common")
    if isinstance(common, p.ChipCommon):
        changes.update(
            aicore_frequency_hertz=hertz(common.aicore_cur_freq_mhz),
            aicore_rated_frequency_hertz=hertz(common.aicore_freq_mhz),
        )
    memory = details.get("memory")
    if isinstance(memory, p.ChipMemory):
        changes["hbm_temperature_celsius"] = memory.hbm_temperature_celsius
    changes.update(hardware_values(details))
    ecc = details.get("ecc")
    if isinstance(ecc, p.ChipEcc):
        # 910B/A3 print DDR lines although they have no DDR: only chips with DDR keep them.
        memories = ("ddr", "hbm") if sample.memory_total_bytes is not None else ("hbm",)
        for field, suffix in ECC_FIELDS.items():
            changes[field] = ecc_counts(ecc, suffix, memories)
    return changes


def fault_values(sample: ChipSample, details: dict[str, object], table: FaultCodeTable) -> dict[str, object]:
    """health_errors and fault_level: the codes of `-t health` (asked only when the overview health is
    not OK; an OK chip has none) and the event ids of `-t current-fault-event` (950), each with its
    level, and the most severe level."""
    if sample.health is None:
        return {}
    codes: tuple[str, ...] = ()
    if sample.health != "OK":
        health = details.get("health")
        if not isinstance(health, p.ChipHealth):
            return {}  # not read (yet): the level is not known
        codes = health.error_codes
    events = details.get("current-fault-event")
    if isinstance(events, p.ChipFaultEvents):
        codes += tuple(event.event_id for event in events.events)
    errors = tuple(FaultCode(code, table.level(code)) for code in dict.fromkeys(codes))
    return {"health_errors": errors, "fault_level": faultlevels.most_severe(e.level for e in errors)}


GB = 1e9  # `-t hccs-bw` prints GB/S


def hardware_values(details: dict[str, object]) -> dict[str, object]:
    """ChipSample fields from the per-chip health and interconnect records (queries.py)."""
    changes: dict[str, object] = {}
    volt = details.get("volt")
    if isinstance(volt, p.ChipVoltage):
        changes["voltage_volts"] = volt.voltage_volts
    pcie = details.get("pcie-err")
    if isinstance(pcie, p.ChipPcieErrors):
        changes["pcie_errors"] = pcie.counts
    sensors = details.get("sensors")
    if isinstance(sensors, p.ChipSensors):
        readings = dict(sensors.temperatures)
        # One HBM temperature: the sensors' reading where printed, else `-t memory`'s.
        if readings.get("hbm") is not None:
            changes["hbm_temperature_celsius"] = readings["hbm"]
        changes["sensor_temperatures"] = tuple((name, value) for name, value in sensors.temperatures if name != "hbm")
    hccs = details.get("hccs")
    if isinstance(hccs, p.ChipHccs):
        changes.update(hccs_healthy=hccs.healthy, hccs_links=hccs.links)
    bandwidth = details.get("hccs-bw")
    if isinstance(bandwidth, p.ChipHccsBandwidth):
        changes["hccs_bandwidth"] = tuple(
            (link, direction, value * GB) for link, tx, rx in bandwidth.links for direction, value in (("tx", tx), ("rx", rx))
        )
    sio = details.get("sio-info")
    if isinstance(sio, p.ChipSio):
        changes["sio_errors"] = tuple((d, n) for d, n in (("tx", sio.tx_errors), ("rx", sio.rx_errors)) if n is not None)
    return changes


def has_ddr(chip: p.InfoChip) -> bool:
    """910B/A3/950 print DDR as `0 / 0` (they have none): that is absence, not an empty DDR."""
    return bool(chip.memory_total_mb)


def ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100.0


def to_bytes(mib: float | None) -> float | None:
    return None if mib is None else float(mib) * MIB


def hertz(mhz: float | None) -> float | None:
    return None if mhz is None else mhz * 1e6


def health_state(value: str | None) -> str | None:
    """npu-smi's Health text as one of HEALTH_STATES (anything unlisted is Unknown)."""
    if value is None:
        return None
    for state in HEALTH_STATES:
        if value.lower() == state.lower():
            return state
    return "Unknown"


# ChipSample field -> the ChipEcc field suffix it reads.
ECC_FIELDS = {"ecc": "errors", "ecc_aggregate": "aggregate_total", "ecc_isolated_pages": "isolated_pages"}


def ecc_counts(ecc: p.ChipEcc, suffix: str, memories: tuple[str, ...] = ("ddr", "hbm")) -> tuple[EccCount, ...]:
    """The counts printed for ``suffix`` (errors, aggregate_total, isolated_pages), per memory and kind."""
    out = []
    for memory in memories:
        for kind in ("single_bit", "double_bit"):
            count = getattr(ecc, f"{memory}_{kind}_{suffix}")
            if count is not None:
                out.append(EccCount(memory, kind, count))
    return tuple(out)


DEVICES = PartKey("devices", DevicesPart)  # its snapshot key
