"""Per-chip and per-process metrics from the npu-smi part of the snapshot."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from exporter.core import faultlevels
from exporter.core.metric import MetricSpec, ValueFamily, chip_labels, family, field_families, label, stateset
from exporter.npusmi import metrics as m
from exporter.npusmi.part import HEALTH_STATES, ChipSample, DevicesPart


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
            seen = family(m.DEVICES)
            seen.add_metric([], part.chips_seen)
            yield seen
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
            for precision, flops, source in chip.peak_flops:
                peaks.add_metric(chip_labels(chip) + [precision, source], flops)
        yield peaks

        for spec in m.ECC_METRICS:
            counts = family(spec)
            for chip in up:
                for count in getattr(chip, spec.field):
                    counts.add_metric(chip_labels(chip) + [count.memory, count.type], count.count)
            yield counts
        yield from hardware_families(up)


def _pairs(spec: MetricSpec, chips: list[ChipSample]) -> ValueFamily:
    """A family of (label value, value) pairs held in the spec's field."""
    metric = family(spec)
    for chip in chips:
        for name, value in getattr(chip, spec.field):
            metric.add_metric(chip_labels(chip) + [str(name)], value)
    return metric


def hardware_families(up: list[ChipSample]) -> Iterator[Metric]:
    """The health and interconnect families of the chips read now."""
    yield _pairs(m.PCIE_ERRORS, up)
    sensors = _pairs(m.SENSOR_TEMPERATURE, up)
    for chip in up:
        if chip.hbm_temperature_celsius is not None:  # one HBM reading, served under both names
            sensors.add_metric(chip_labels(chip) + ["hbm"], chip.hbm_temperature_celsius)
    yield sensors
    healthy = family(m.HCCS_HEALTHY)
    for chip in up:
        if chip.hccs_healthy is not None:
            healthy.add_metric(chip_labels(chip), 1 if chip.hccs_healthy else 0)
    yield healthy
    info, packets, octets, retries, errors = (
        family(s) for s in (m.HCCS_LINK_INFO, m.HCCS_PACKETS, m.HCCS_BYTES, m.HCCS_RETRIES, m.HCCS_ERRORS)
    )
    for chip in up:
        for link in chip.hccs_links:
            labels = chip_labels(chip) + [str(link.link)]
            if link.lane_mode is not None or link.speed_gbps is not None:
                info.add_metric(labels + [label(link.lane_mode), label(link.lane_list), label(link.speed_gbps)], 1)
            for direction, count, size in (("tx", link.tx_packets, link.tx_bytes), ("rx", link.rx_packets, link.rx_bytes)):
                if count is not None:
                    packets.add_metric(labels + [direction], count)
                if size is not None:
                    octets.add_metric(labels + [direction], size)
            if link.retries is not None:
                retries.add_metric(labels, link.retries)
            if link.errors is not None:
                errors.add_metric(labels, link.errors)
    yield from (info, packets, octets, retries, errors)
    bandwidth = family(m.HCCS_BANDWIDTH)
    for chip in up:
        for link_id, direction, value in chip.hccs_bandwidth:
            bandwidth.add_metric(chip_labels(chip) + [str(link_id), direction], value)
    yield bandwidth
    yield _pairs(m.SIO_ERRORS, up)
    pods = family(m.SUPERPOD_INFO)
    for chip in up:
        pod = chip.superpod
        if pod is not None:
            pods.add_metric(
                chip_labels(chip) + [label(pod.super_pod_id), label(pod.super_pod_size), label(pod.server_index), label(pod.sdid)], 1
            )
    yield pods


class ProcessesCollector:
    specs = m.PROCESS_METRICS

    def render(self, part: DevicesPart) -> Iterator[Metric]:
        procs = family(m.PROCESS_MEMORY)
        for proc in part.processes:
            if proc.memory_bytes is not None:
                procs.add_metric(chip_labels(proc) + [str(proc.pid), proc.name], proc.memory_bytes)
        yield procs
