"""The chip's own links and sensors at the hardware level: HCCS (chip to chip), SIO (die to
die), PCIe (to the host) and the `-t sensors` temperatures, judged as their alerts judge them
with the table's thresholds (NPUHCCSLinkDown, NPUHCCSErrors, NPUSIOErrors, NPUPCIeErrors,
NPUSensorTemperatureHigh). HCCS bandwidth is shown against the links' speed and not judged:
the table has no bound for it.

The error counters page on new errors (their increase over the window, or between the first and
the last of several reads); one reading cannot date a count, so it is shown without a verdict
(a healthy node may carry old counts that stand still). Pure: HardwareReadings in, findings out.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.diagnostics.hardware_base import finding, key, paged, too_hot
from exporter.diagnostics.model import COUNT, RATIO, Finding, HardwareReadings, Labels, Series
from exporter.npusmi.metrics import (
    HCCS_BANDWIDTH,
    HCCS_ERRORS,
    HCCS_HEALTHY,
    HCCS_LINK_INFO,
    HCCS_RETRIES,
    PCIE_ERRORS,
    SENSOR_TEMPERATURE,
    SIO_ERRORS,
)
from exporter.thresholds.table import HEALTHY, Thresholds

LINK_DOWN = "NPUHCCSLinkDown"
BYTES_PER_GBIT = 1e9 / 8  # npu_hccs_link_info's speed_gbps, per direction


@dataclass(frozen=True)
class Counter:
    """An error counter and the alert that pages on its new counts, per chip (the labels in
    ``by`` summed, as the alert sums them)."""

    check: str
    metric: str
    alert: str
    title: str
    by: str  # the label summed over


COUNTERS = (
    Counter("hccs_errors", HCCS_ERRORS.name, "NPUHCCSErrors", "HCCS CRC errors", "link"),
    Counter("sio_errors", SIO_ERRORS.name, "NPUSIOErrors", "Die-to-die (SIO) CRC errors", "direction"),
    Counter("pcie_errors", PCIE_ERRORS.name, "NPUPCIeErrors", "PCIe errors and retries", "type"),
)
# Read at their latest value in the window; the counters also as their increase over it.
LATEST = (HCCS_HEALTHY.name, HCCS_LINK_INFO.name, HCCS_BANDWIDTH.name, HCCS_RETRIES.name, SENSOR_TEMPERATURE.name) + tuple(
    c.metric for c in COUNTERS
)
INCREASES = tuple(c.metric for c in COUNTERS)


def interconnect_findings(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    return [
        *hccs_links(readings, table),
        *hccs_bandwidth(readings),
        *(f for counter in COUNTERS for f in counter_findings(readings, table, counter)),
        *sensors(readings, table),
    ]


def _chip(labels: Labels) -> tuple[str, ...]:
    return key(labels)[:4]


def _per_chip(series: tuple[Series, ...]) -> dict[tuple[str, ...], list[Series]]:
    out: dict[tuple[str, ...], list[Series]] = {}
    for labels, value in series:
        out.setdefault(_chip(labels), []).append((labels, value))
    return out


def _link_order(labels: Labels) -> tuple[int, str]:
    link = labels.get("link", "")
    return (int(link) if link.isdigit() else 1 << 30, link)


def narrow_links(info: list[Series]) -> list[str]:
    """The links of one chip running on fewer lanes than its widest (npu_hccs_link_info)."""
    modes = {labels.get("link", "?"): labels.get("lane_mode", "") for labels, _ in info}
    widths = [int(m) for m in modes.values() if m.isdigit()]
    if not widths:
        return []
    widest = max(widths)
    return [
        f"link {labels.get('link', '?')}: {labels.get('lane_mode')} of {widest} lanes ({labels.get('lane_list', '?')}, "
        f"{labels.get('speed_gbps', '?')} Gbit/s)"
        for labels, _ in sorted(info, key=lambda s: _link_order(s[0]))
        if labels.get("lane_mode", "").isdigit() and int(labels["lane_mode"]) < widest
    ]


def _erring_links(readings: HardwareReadings, chip: tuple[str, ...]) -> list[str]:
    """Links of the chip with CRC errors (their count, latest: since the driver started)."""
    retries = {labels.get("link", ""): value for labels, value in readings.get(HCCS_RETRIES.name) if _chip(labels) == chip}
    return [
        f"link {labels.get('link', '?')}: {_n(value)} CRC errors, {_n(retries.get(labels.get('link', ''), 0.0))} retries since the driver started"
        for labels, value in sorted(readings.get(HCCS_ERRORS.name), key=lambda s: _link_order(s[0]))
        if _chip(labels) == chip and value > 0
    ]


def hccs_links(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Each chip's HCCS health as npu-smi prints it (NPUHCCSLinkDown on NOK), naming the links
    that lost lanes and those counting errors."""
    spec = table.find(LINK_DOWN)
    info = _per_chip(readings.get(HCCS_LINK_INFO.name))
    out = []
    for labels, value in readings.get(HCCS_HEALTHY.name):
        chip = _chip(labels)
        facts = [*narrow_links(info.get(chip, [])), *_erring_links(readings, chip)]
        if value == 0:
            verdict = paged(spec) if spec else None
            title, detail = "HCCS links NOK", "; ".join(["npu-smi -t hccs health status NOK", *facts])
        else:
            verdict = HEALTHY if spec else None
            title, detail = "HCCS links OK", "; ".join(facts)
        bounds = f"{paged(spec)}: health status NOK" if spec else ""
        out.append(finding("hccs_link", title, labels, None, COUNT, verdict, LINK_DOWN if spec else None, bounds, detail))
    return out


def hccs_bandwidth(readings: HardwareReadings) -> list[Finding]:
    """Each chip's HCCS traffic at its latest `-t hccs-bw` sample, as a share of its links'
    speed each way where npu_hccs_link_info gives it: shown, not judged."""
    speeds = {
        (_chip(labels), labels.get("link", "")): float(labels["speed_gbps"]) * BYTES_PER_GBIT
        for labels, _ in readings.get(HCCS_LINK_INFO.name)
        if labels.get("speed_gbps", "").replace(".", "", 1).isdigit()
    }
    out = []
    for chip, series in _per_chip(readings.get(HCCS_BANDWIDTH.name)).items():
        each = {d: sum(v for labels, v in series if labels.get("direction") == d) for d in ("tx", "rx")}
        links = sorted({labels.get("link", "") for labels, _ in series}, key=lambda link: _link_order({"link": link}))
        capacity = sum(speeds.get((chip, link), 0.0) for link in links)
        known = capacity > 0 and all((chip, link) in speeds for link in links)
        share = max(each.values()) / capacity if known else None
        detail = f"tx {each['tx'] / 1e9:.3g}, rx {each['rx'] / 1e9:.3g} GB/s on {len(links)} links"
        if known:
            detail += f" of {capacity / 1e9:.3g} GB/s each way"
        out.append(finding("hccs_bandwidth", "HCCS bandwidth (of the links' speed)", series[0][0], share, RATIO, None, None, "", detail))
    return out


def counter_findings(readings: HardwareReadings, table: Thresholds, counter: Counter) -> list[Finding]:
    """New counts over the window (or between reads) above the alert's threshold: its verdict;
    with one reading, a non-zero count is shown undated."""
    spec = table.find(counter.alert)
    if spec is None or spec.threshold is None:
        return []
    if readings.increases:
        return [
            finding(
                counter.check,
                f"New {counter.title}",
                labels,
                total,
                COUNT,
                paged(spec),
                spec.alert,
                f"{paged(spec)}: > {spec.threshold:g} new in the window",
                parts,
            )
            for labels, total, parts in _summed(readings.increases.get(counter.metric, ()), counter.by)
            if total > spec.threshold
        ]
    return [
        finding(
            counter.check,
            f"{counter.title}, current count",
            labels,
            total,
            COUNT,
            None,
            spec.alert,
            "",
            f"{parts}; since the driver started: one reading cannot date them",
        )
        for labels, total, parts in _summed(readings.get(counter.metric), counter.by)
        if total > 0
    ]


def _summed(series: tuple[Series, ...] | list[Series], by: str) -> list[tuple[Labels, float, str]]:
    """Per chip: the sum over ``by`` and the non-zero parts in words (``link 2: 3``)."""
    out = []
    for rows in _per_chip(tuple(series)).values():
        rows = sorted(rows, key=lambda s: _link_order({"link": s[0].get(by, "")}))
        parts = ", ".join(f"{by} {labels.get(by, '?')}: {_n(value)}" for labels, value in rows if value > 0)
        out.append((rows[0][0], sum(value for _, value in rows), parts))
    return out


def sensors(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """The `-t sensors` temperatures with a published limit (NPUSensorTemperatureHigh's params.sensors)."""
    spec = table.find("NPUSensorTemperatureHigh")
    limited = tuple(spec.param("sensors", ("soc_max",))) if spec else ()
    return too_hot(
        readings, spec, SENSOR_TEMPERATURE.name, "sensor_temperature", _sensor_title, lambda labels: labels.get("sensor") in limited
    )


def _sensor_title(labels: Labels) -> str:
    return f"Sensor {labels.get('sensor', '?')} temperature"


def _n(count: float) -> str:
    """A count as npu-smi prints it: 1462416, not 1.46242e+06."""
    return f"{count:.0f}" if float(count).is_integer() else f"{count:g}"
