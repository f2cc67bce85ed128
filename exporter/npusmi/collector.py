"""Per-chip and per-process metrics from the npu-smi part of the snapshot."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core import faultlevels
from exporter.core.metric import chip_labels, family, field_families, label, stateset
from exporter.npusmi import metrics as m
from exporter.npusmi.part import HEALTH_STATES, DevicesPart


class ChipsCollector:
    """Every chip ever seen gets npu_device_info and npu_up; the values come from chips read now."""

    specs = m.CHIP_METRICS

    def render(self, part: DevicesPart) -> Iterator[Metric]:
        up = [c for c in part.chips if c.up]

        info, alive = family(m.DEVICE_INFO), family(m.UP)
        for chip in part.chips:
            labels = chip_labels(chip)
            info.add_metric(labels + [label(chip.model), label(chip.bus_id), label(chip.phy_id), label(chip.vdie_id)], 1)
            alive.add_metric(labels, 1 if chip.up else 0)
        yield info
        yield alive
        yield stateset(m.HEALTH, HEALTH_STATES, up, chip_labels)
        codes = family(m.HEALTH_ERROR)
        for chip in up:
            for error in chip.health_errors:
                codes.add_metric(chip_labels(chip) + [error.code, error.level], 1)
        yield codes
        yield stateset(m.FAULT_LEVEL, faultlevels.NAMES, up, chip_labels)

        if part.driver_version or part.tool_version:
            driver = family(m.DRIVER_INFO)
            driver.add_metric([label(part.driver_version), label(part.tool_version)], 1)
            yield driver
        if part.chips_seen is not None:
            count = family(m.DEVICES)
            count.add_metric([], part.chips_seen)
            yield count
        expected = family(m.EXPECTED_DEVICES)
        for source, value in (("config", part.expected_devices), ("pci", part.pci_expected_devices)):
            if value is not None:
                expected.add_metric([source], value)
        yield expected
        functions = family(m.PCI_FUNCTIONS)
        for device_id, count in part.pci_functions:
            functions.add_metric([device_id], count)
        yield functions

        yield from field_families(m.CHIP_GAUGES, up, chip_labels)
        yield from field_families((m.ENERGY,), up, chip_labels)
        skipped = family(m.ENERGY_SKIPPED)
        skipped.add_metric([], part.energy_skipped_intervals)
        yield skipped
        peaks = family(m.PEAK_FLOPS)
        for chip in up:
            for precision, flops in chip.peak_flops:
                peaks.add_metric(chip_labels(chip) + [precision], flops)
        yield peaks

        for spec in m.ECC_METRICS:
            counts = family(spec)
            for chip in up:
                for count in getattr(chip, spec.field):
                    counts.add_metric(chip_labels(chip) + [count.memory, count.type], count.count)
            yield counts


class ProcessesCollector:
    specs = m.PROCESS_METRICS

    def render(self, part: DevicesPart) -> Iterator[Metric]:
        procs = family(m.PROCESS_MEMORY)
        for proc in part.processes:
            if proc.memory_bytes is not None:
                procs.add_metric(chip_labels(proc) + [str(proc.pid), proc.name], proc.memory_bytes)
        yield procs
