"""The npu-smi part of the snapshot, and the pure conversion from parsed records to it.

Base units (bytes, watts, hertz, ratios 0..1); ``None`` means not reported by this chip or
driver, which is different from zero. A field's comment names the npu-smi command and
column it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from exporter.core import faultlevels
from exporter.core.snapshot import PartKey
from exporter.npusmi.faultcodes import FaultCodeTable
from exporter.npusmi.parse.faultevents import ChipFaultEvents
from exporter.npusmi.parse.records import (
    ChipCommon,
    ChipEcc,
    ChipHccs,
    ChipHccsBandwidth,
    ChipHealth,
    ChipMapEntry,
    ChipMemory,
    ChipPcieErrors,
    ChipSensors,
    ChipSio,
    ChipUsages,
    ChipVoltage,
    HccsLink,
    InfoChip,
    InfoTable,
    SuperPod,
)

ChipKey = tuple[int, int]  # (NPU id, chip id)
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
    peak_flops: tuple[tuple[str, float, str], ...] = ()  # (precision, FLOP/s, source): npusmi/peak.py
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
    hccs_links: tuple[HccsLink, ...] = ()  # `-t hccs -c` per-link lists
    hccs_bandwidth: tuple[tuple[int, str, float], ...] = ()  # `-t hccs-bw -c`: (link, tx|rx, bytes per second)
    sio_errors: tuple[tuple[str, int], ...] = ()  # `-t sio-info -c`: (tx|rx, count)
    superpod: SuperPod | None = None  # `-t spod-info -c` (inventory)


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
    pending_chips: int = 0  # listed, withheld until their device id is known (npusmi/devices.py)
    expected_devices: int | None = None  # npu_smi.expected_devices (None: not set)
    pci_expected_devices: int | None = None  # chips the Ascend PCI functions in sysfs carry (npusmi/pci.py)
    pci_functions: tuple[tuple[str, int], ...] = ()  # (PCI device id, Ascend functions with it) in sysfs
    energy_skipped_intervals: int = 0  # power-read intervals too long to integrate (npusmi/energy.py)


# --- records -> samples (pure) ------------------------------------------------------------------

R = TypeVar("R")
GB = 1e9  # `-t hccs-bw` prints GB/S
Faults = tuple[tuple[FaultCode, ...], str | None]  # health_errors, fault_level


def chip_sample(
    identity: ChipSample,
    chip: InfoChip,
    details: Mapping[str, object],
    table: FaultCodeTable,
    *,
    energy_joules: float | None = None,
    peak_flops: tuple[tuple[str, float, str], ...] = (),
    card_power_watts: float | None = None,
) -> ChipSample:
    """``identity`` read now: the values of its rows of `npu-smi info` and of its fresh `-t`
    records by kind (usages, common, ...; queries.py). ``card_power_watts`` (310P) stands in for
    a chip printing no power. Built in one call: it runs for every chip at every snapshot."""
    ddr = has_ddr(chip)
    health = health_state(chip.health)
    health_errors, fault_level = chip_faults(health, details, table)
    npu_utilization = ratio(chip.npu_util_percent)
    usages = record_of(details, "usages", ChipUsages)
    common = record_of(details, "common", ChipCommon)
    memory = record_of(details, "memory", ChipMemory)
    volt = record_of(details, "volt", ChipVoltage)
    pcie = record_of(details, "pcie-err", ChipPcieErrors)
    sensors = record_of(details, "sensors", ChipSensors)
    hccs = record_of(details, "hccs", ChipHccs)
    bandwidth = record_of(details, "hccs-bw", ChipHccsBandwidth)
    sio = record_of(details, "sio-info", ChipSio)
    # One HBM temperature: the sensors' reading where printed, else `-t memory`'s.
    hbm_sensor = dict(sensors.temperatures).get("hbm") if sensors else None
    ecc, ecc_aggregate, ecc_isolated_pages = ecc_values(record_of(details, "ecc", ChipEcc), ddr)
    return ChipSample(
        npu=identity.npu,
        chip=identity.chip,
        device=identity.device,
        up=True,
        model=identity.model,
        bus_id=identity.bus_id,
        phy_id=identity.phy_id,
        vdie_id=identity.vdie_id,
        superpod=identity.superpod,
        health=health,
        health_errors=health_errors,
        fault_level=fault_level,
        aicore_utilization_ratio=ratio(chip.aicore_percent),
        aivector_utilization_ratio=ratio(usages.aivector_percent) if usages else None,
        aicube_utilization_ratio=ratio(usages.aicube_percent) if usages else None,
        aicpu_utilization_ratio=ratio(usages.aicpu_percent) if usages else None,
        ctrlcpu_utilization_ratio=ratio(usages.ctrlcpu_percent) if usages else None,
        npu_utilization_ratio=ratio(usages.npu_util_percent) if npu_utilization is None and usages else npu_utilization,
        hbm_used_bytes=to_bytes(chip.hbm_used_mb),
        hbm_total_bytes=to_bytes(chip.hbm_total_mb),
        hbm_bandwidth_utilization_ratio=ratio(usages.hbm_bandwidth_percent) if usages else None,
        memory_used_bytes=to_bytes(chip.memory_used_mb) if ddr else None,
        memory_total_bytes=to_bytes(chip.memory_total_mb) if ddr else None,
        ddr_bandwidth_utilization_ratio=ratio(usages.ddr_bandwidth_percent) if usages and ddr else None,
        hugepages_used=chip.hugepages_used,
        hugepages_total=chip.hugepages_total,
        power_watts=chip.power_watts if chip.power_watts is not None else card_power_watts,
        peak_flops=peak_flops,
        energy_joules=energy_joules,
        temperature_celsius=chip.temperature_celsius,
        hbm_temperature_celsius=hbm_sensor if hbm_sensor is not None else (memory.hbm_temperature_celsius if memory else None),
        aicore_frequency_hertz=hertz(common.aicore_cur_freq_mhz) if common else None,
        aicore_rated_frequency_hertz=hertz(common.aicore_freq_mhz) if common else None,
        ecc=ecc,
        ecc_aggregate=ecc_aggregate,
        ecc_isolated_pages=ecc_isolated_pages,
        voltage_volts=volt.voltage_volts if volt else None,
        pcie_errors=pcie.counts if pcie else (),
        sensor_temperatures=tuple((name, value) for name, value in sensors.temperatures if name != "hbm") if sensors else (),
        hccs_healthy=hccs.healthy if hccs else None,
        hccs_links=hccs.links if hccs else (),
        hccs_bandwidth=tuple(
            (link, direction, value * GB) for link, tx, rx in bandwidth.links for direction, value in (("tx", tx), ("rx", rx))
        )
        if bandwidth
        else (),
        sio_errors=tuple((d, n) for d, n in (("tx", sio.tx_errors), ("rx", sio.rx_errors)) if n is not None) if sio else (),
    )


def record_of(details: Mapping[str, object], kind: str, record_type: type[R]) -> R | None:
    """The fresh record of ``kind``, if it is one of ``record_type``."""
    found = details.get(kind)
    return found if isinstance(found, record_type) else None


def chip_faults(health: str | None, details: Mapping[str, object], table: FaultCodeTable) -> Faults:
    """health_errors and fault_level: the codes of `-t health` (asked only when the overview health is
    not OK; an OK chip has none) and the event ids of `-t current-fault-event` (950), each with its
    level, and the most severe level. ((), None) while the codes of a chip not OK are not read."""
    if health is None:
        return (), None
    codes: tuple[str, ...] = ()
    if health != "OK":
        read = record_of(details, "health", ChipHealth)
        if read is None:
            return (), None  # not read (yet): the level is not known
        codes = read.error_codes
    events = record_of(details, "current-fault-event", ChipFaultEvents)
    if events is not None:
        codes += tuple(event.event_id for event in events.events)
    errors = tuple(FaultCode(code, table.level(code)) for code in dict.fromkeys(codes))
    return errors, faultlevels.most_severe(e.level for e in errors)


def has_ddr(chip: InfoChip) -> bool:
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


EccCounts = tuple[EccCount, ...]


def ecc_values(ecc: ChipEcc | None, ddr: bool) -> tuple[EccCounts, EccCounts, EccCounts]:
    """ecc, ecc_aggregate and ecc_isolated_pages of `-t ecc`. 910B/A3 print DDR lines although
    they have no DDR: only chips with DDR keep them."""
    if ecc is None:
        return (), (), ()
    memories = ("ddr", "hbm") if ddr else ("hbm",)
    return ecc_counts(ecc, "errors", memories), ecc_counts(ecc, "aggregate_total", memories), ecc_counts(ecc, "isolated_pages", memories)


def ecc_counts(ecc: ChipEcc, suffix: str, memories: tuple[str, ...] = ("ddr", "hbm")) -> EccCounts:
    """The counts printed for ``suffix`` (errors, aggregate_total, isolated_pages), per memory and kind."""
    out = []
    for memory in memories:
        for kind in ("single_bit", "double_bit"):
            count = getattr(ecc, f"{memory}_{kind}_{suffix}")
            if count is not None:
                out.append(EccCount(memory, kind, count))
    return tuple(out)


DEVICES = PartKey("devices", DevicesPart)  # its snapshot key


def process_samples(
    table: InfoTable, named: Mapping[ChipKey, tuple[bool, int | None]], chip_map: Mapping[ChipKey, ChipMapEntry]
) -> tuple[ProcessSample, ...]:
    """The process rows of the chips that are served, under their chip's device label (``named``:
    (servable, device) by chip; a row of a chip the overview did not list takes `info -m`'s id)."""
    out = []
    for proc in table.processes or ():
        key = (proc.npu_id, proc.chip_id if proc.chip_id is not None else 0)
        mapped = chip_map.get(key)
        servable, device = named.get(key, (True, mapped.logic_id if mapped else None))
        if servable:
            out.append(ProcessSample(key[0], key[1], device, proc.pid, proc.name, to_bytes(proc.memory_mb)))
    return tuple(out)
