"""Per-chip metrics from the npu-smi part of the snapshot."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.collectors import chip_labels, family, field_families, label, stateset
from exporter.sampler import SnapshotStore
from exporter.snapshot import DevicesPart

# Plain gauges: (spec, snapshot field).
_GAUGES = (
    (m.AICORE, "aicore_utilization_ratio"),
    (m.AIVECTOR, "aivector_utilization_ratio"),
    (m.AICUBE, "aicube_utilization_ratio"),
    (m.AICPU, "aicpu_utilization_ratio"),
    (m.CTRLCPU, "ctrlcpu_utilization_ratio"),
    (m.NPU_UTIL, "npu_utilization_ratio"),
    (m.HBM_USED, "hbm_used_bytes"),
    (m.HBM_TOTAL, "hbm_total_bytes"),
    (m.HBM_BW, "hbm_bandwidth_utilization_ratio"),
    (m.MEM_USED, "memory_used_bytes"),
    (m.MEM_TOTAL, "memory_total_bytes"),
    (m.DDR_BW, "ddr_bandwidth_utilization_ratio"),
    (m.HUGEPAGES_USED, "hugepages_used"),
    (m.HUGEPAGES_TOTAL, "hugepages_total"),
    (m.POWER, "power_watts"),
    (m.TEMPERATURE, "temperature_celsius"),
    (m.HBM_TEMPERATURE, "hbm_temperature_celsius"),
    (m.AICORE_FREQ, "aicore_frequency_hertz"),
    (m.AICORE_RATED_FREQ, "aicore_rated_frequency_hertz"),
    (m.VOLTAGE, "voltage_volts"),
)


class DeviceCollector:
    """Renders chips; data older than ``max_age`` is withheld, never served as fresh."""

    def __init__(
        self,
        store: SnapshotStore,
        max_age: float,
        chips: bool = True,
        processes: bool = True,
        clock: Callable[[], float] = time.monotonic,  # the sources stamp reads with time.monotonic()
    ) -> None:
        self.store = store
        self.max_age = max_age
        self.chips = chips
        self.processes = processes
        self.clock = clock

    def describe(self) -> Iterator[Metric]:
        for spec in m.DEVICE_METRICS:
            if (spec is m.PROCESS_MEMORY and self.processes) or (spec is not m.PROCESS_MEMORY and self.chips):
                yield family(spec)

    def collect(self) -> Iterator[Metric]:
        part = self.store.current.devices
        now = self.clock()
        if self.chips:
            yield from self._chips(part, now)
        if self.processes:
            yield self._processes(part, now)

    def _chips(self, part: DevicesPart, now: float) -> Iterator[Metric]:
        fresh = [c for c in part.chips if c.up and now - c.observed_at <= self.max_age]
        fresh_keys = {(c.npu, c.chip) for c in fresh}

        info, up = family(m.DEVICE_INFO), family(m.UP)
        for chip in part.chips:
            labels = chip_labels(chip)
            info.add_metric(labels + [label(chip.model), label(chip.bus_id), label(chip.phy_id), label(chip.vdie_id)], 1)
            up.add_metric(labels, 1 if (chip.npu, chip.chip) in fresh_keys else 0)
        yield info
        yield up
        yield stateset(m.HEALTH, m.HEALTH_STATES, fresh, chip_labels, lambda chip: chip.health)
        codes = family(m.HEALTH_ERROR)
        for chip in fresh:
            for code in chip.health_error_codes:
                codes.add_metric(chip_labels(chip) + [code], 1)
        yield codes

        if part.driver_version or part.tool_version:
            driver = family(m.DRIVER_INFO)
            driver.add_metric([label(part.driver_version), label(part.tool_version)], 1)
            yield driver
        if part.chips_seen is not None:
            count = family(m.DEVICES)
            count.add_metric([], part.chips_seen)
            yield count

        yield from field_families(_GAUGES, fresh, chip_labels)

        ecc = family(m.ECC_ERRORS)
        for chip in fresh:
            for count in chip.ecc:
                ecc.add_metric(chip_labels(chip) + [count.memory, count.type], count.count)
        yield ecc


    def _processes(self, part: DevicesPart, now: float) -> Metric:
        procs = family(m.PROCESS_MEMORY)
        if now - part.processes_observed_at <= self.max_age:
            for proc in part.processes:
                if proc.memory_bytes is not None:
                    labels = chip_labels(proc) + [str(proc.pid), proc.name]
                    procs.add_metric(labels, proc.memory_bytes)
        return procs
