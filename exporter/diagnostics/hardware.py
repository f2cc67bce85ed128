"""The hardware level beyond ECC pages: what the hardware alerts page on, judged from the
latest readings (and the increase of counters) that every reader hands over in one shape.

Pure: a HardwareReadings in, findings out. The verdicts follow the alerts' thresholds from
the same table (NPUUnhealthy, NPUNeedsIsolation, NPUMissing, NPUNetwork*, NPUOptical*, NPUTemperatureHigh,
NPUECCDoubleBitErrors, CANNExporterSourceFailing, CANNExporterDown; the chip's links and
sensors in interconnect.py, HBM, PFC storms and the exporter's own limits in node_checks.py), so
`diagnose` names what the alerts name. A chip with an abnormal verdict here gets hardware advice
(hardware_advice.py); its low utilization is a consequence, not a pipeline problem (analysis.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.core import faultlevels
from exporter.diagnostics import interconnect, node_checks
from exporter.diagnostics.hardware_advice import READ_FAILURE
from exporter.diagnostics.hardware_base import finding, instance, key, too_hot
from exporter.diagnostics.model import (
    COUNT,
    HARDWARE,
    PER_SECOND,
    SECONDS,
    Finding,
    HardwareReadings,
    Labels,
)
from exporter.hccn.metrics import (
    NETWORK_ERRORS,
    NETWORK_HEALTH,
    NETWORK_LINK_DOWN_TRANSITIONS,
    NETWORK_LINK_UP,
    NETWORK_LINK_UP_TRANSITIONS,
    OPTICAL_PRESENT,
    OPTICAL_RX_POWER,
    OPTICAL_TEMPERATURE,
    OPTICAL_TX_POWER,
)
from exporter.npusmi.metrics import (
    DEVICES,
    ECC_ERRORS,
    EXPECTED_DEVICES,
    FAULT_LEVEL,
    HEALTH,
    HEALTH_ERROR,
    TEMPERATURE,
    UP,
)
from exporter.thresholds.alert_facts import OPTICAL_POWER, optical_power_limits
from exporter.thresholds.table import (
    ABNORMAL,
    HEALTHY,
    WARNING,
    GenerateError,
    Thresholds,
)

SUBJECT_FAILING = "cann_exporter_source_subject_failing"
# The most chips each exporter listed within NPUMissing's lookback before the window's end: the
# alert's own fallback on a node without npu_expected_devices (Prometheus only).
PEAK_DEVICES = "npu_devices:peak"
# Read at their latest value in the window.
LATEST = (
    HEALTH.name,
    HEALTH_ERROR.name,
    FAULT_LEVEL.name,
    UP.name,
    DEVICES.name,
    EXPECTED_DEVICES.name,
    SUBJECT_FAILING,
    NETWORK_LINK_UP.name,
    NETWORK_HEALTH.name,
    OPTICAL_PRESENT.name,
    OPTICAL_RX_POWER.name,
    OPTICAL_TX_POWER.name,
    OPTICAL_TEMPERATURE.name,
    TEMPERATURE.name,
    ECC_ERRORS.name,
    *interconnect.LATEST,
    *node_checks.LATEST,
)
# Read as their increase over the window (counters).
INCREASES = (
    NETWORK_ERRORS.name,
    NETWORK_LINK_DOWN_TRANSITIONS.name,
    NETWORK_LINK_UP_TRANSITIONS.name,
    ECC_ERRORS.name,
    *interconnect.INCREASES,
    *node_checks.INCREASES,
)
# Matchers narrowing what a reader asks for of a series, where the checks read part of it.
ONLY = node_checks.ONLY


def hardware_findings(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    return [
        *health(readings, table),
        *unreadable(readings),
        *missing(readings, table),
        *read_failures(readings),
        *temperature(readings, table),
        *ecc_double_bit(readings, table),
        *network(readings, table),
        *optics(readings, table),
        *interconnect.interconnect_findings(readings, table),
        *node_checks.node_findings(readings, table),
        *gaps(readings),
    ]


def health(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Each chip's npu-smi Health (the stateset's current state) with its fault level, what to do
    about it, and its error codes with their levels. A level that takes the chip out of service
    (NPUNeedsIsolation) is abnormal whatever the health says."""
    spec = table.find("NPUUnhealthy")
    isolation = table.find("NPUNeedsIsolation")
    paging = tuple(spec.param("states", ("Alarm", "Critical"))) if spec else ("Alarm", "Critical")
    isolating = tuple(isolation.param("levels", faultlevels.ISOLATION)) if isolation else ()
    codes: dict[tuple[str, ...], list[str]] = {}
    for labels, value in readings.get(HEALTH_ERROR.name):
        if value == 1:
            level = f" ({labels['level']})" if labels.get("level") else ""
            codes.setdefault(key(labels), []).append(labels.get("code", "?") + level)
    levels = {key(labels): labels.get("level", "") for labels, value in readings.get(FAULT_LEVEL.name) if value == 1}
    out = []
    for labels, value in readings.get(HEALTH.name):
        if value != 1:
            continue
        state = labels.get("state", "?")
        level = levels.get(key(labels), "")
        verdict = ABNORMAL if state in paging or level in isolating else HEALTHY if state == "OK" else WARNING
        found = sorted(codes.get(key(labels), []))
        detail = f"state {state}"
        if level and level != faultlevels.NONE:
            detail += f", fault level {level}: {faultlevels.action(level)}"
        detail += f", error codes {', '.join(found)}" if found else ""
        alert = "NPUNeedsIsolation" if isolation and level in isolating else "NPUUnhealthy" if spec else None
        title = f"Health {state}" + (f", fault level {level}" if level and level != faultlevels.NONE else "")
        bounds = "abnormal: " + ", ".join((" or ".join(paging), *((" or ".join(isolating),) if isolating else ())))
        out.append(finding("health", title, labels, None, COUNT, verdict, alert, bounds, detail))
    return sorted(out, key=lambda f: f.subject)


def unreadable(readings: HardwareReadings) -> list[Finding]:
    return [
        finding("unreadable", "Chip could not be read (npu_up 0)", labels, value, COUNT, ABNORMAL, None, "abnormal: the latest read failed")
        for labels, value in readings.get(UP.name)
        if value == 0
    ]


# Where npu_expected_devices{source} comes from, in words.
EXPECTED_SOURCES = {"config": "npu_smi.expected_devices", "pci": "the Ascend PCI functions in sysfs"}


def missing(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Per exporter, the chips npu-smi lists against the chips the node should have:
    npu_expected_devices (config, else pci), else (from Prometheus) the most it listed within
    NPUMissing's lookback, the alert's own fallback, which tells only a chip lost within it.
    Without either the count is unknown: never "0 missing"."""
    spec = table.find("NPUMissing")
    lookback = spec.param("lookback", "1d") if spec else "1d"
    alert = spec.alert if spec else None
    expected: dict[str, tuple[float, str]] = {}
    for labels, value in readings.get(EXPECTED_DEVICES.name):
        source = labels.get("source", "")
        if instance(labels) not in expected or source == "config":
            what = EXPECTED_SOURCES.get(source, "")
            expected[instance(labels)] = (value, f'npu_expected_devices{{source="{source}"}}' + (f" ({what})" if what else ""))
    peaks = {instance(labels): value for labels, value in readings.get(PEAK_DEVICES)}
    out = []
    for labels, seen in readings.get(DEVICES.name):
        where = instance(labels)
        if where not in expected and peaks.get(where, 0.0) > seen:
            expected[where] = (peaks[where], f"the most it listed in the {lookback} before the window's end (NPUMissing's fallback)")
        if where not in expected:
            known = f"; it listed no more within the {lookback} before the window's end" if where in peaks else ""
            detail = (
                f"unknown: no expected count ({seen:g} chips listed; no npu_expected_devices: set npu_smi.expected_devices, "
                f"or let the exporter read the PCI functions in sysfs{known})"
            )
            out.append(finding("missing", "Chips missing", f"{where}: chips", None, COUNT, None, alert, "", detail))
            continue
        want, basis = expected[where]
        gone = want - seen
        out.append(
            finding(
                "missing",
                "Chips missing",
                f"{where}: chips",
                max(0.0, gone),
                COUNT,
                ABNORMAL if gone > 0 else HEALTHY,
                alert,
                f"abnormal: fewer than the {want:g} expected",
                f"{seen:g} of {want:g} chips listed by npu-smi; expected from {basis}",
            )
        )
    return out


def read_failures(readings: HardwareReadings) -> list[Finding]:
    """Reads failing on a subject of a source (an npu-smi command on a card, an hccn_tool query
    on a port), with the reason (cann_exporter_source_subject_failing); the advice follows the
    tool (hardware_advice.advice_key)."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for labels, value in readings.get(SUBJECT_FAILING):
        if value == 1:
            where = f"{instance(labels)}: {labels.get('source', '?')}"
            reasons.setdefault((where, labels.get("reason", "?")), []).append(labels.get("subject", "?"))
    return [
        finding(
            READ_FAILURE,
            f"Read failures ({reason})",
            where,
            len(subjects),
            COUNT,
            WARNING,
            "CANNExporterSourceFailing",
            "warning: any failing subject",
            ", ".join(sorted(subjects)),
        )
        for (where, reason), subjects in sorted(reasons.items())
    ]


def temperature(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    return too_hot(readings, table.find("NPUTemperatureHigh"), TEMPERATURE.name, "temperature", "Chip temperature")


def ecc_double_bit(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Uncorrectable errors: new ones within the window page (NPUECCDoubleBitErrors); with one
    reading, a non-zero current count is told but cannot be dated."""
    spec = table.find("NPUECCDoubleBitErrors")
    name = spec.alert if spec else None
    if readings.increases:
        return [
            finding(
                "ecc_double_bit",
                "New uncorrectable (double-bit) ECC errors",
                labels,
                value,
                COUNT,
                ABNORMAL,
                name,
                "abnormal: any new in the window",
                labels.get("memory", ""),
            )
            for labels, value in readings.increases.get(ECC_ERRORS.name, ())
            if _double(labels) and value > 0
        ]
    return [
        finding(
            "ecc_double_bit",
            "Uncorrectable (double-bit) ECC errors, current count",
            labels,
            value,
            COUNT,
            WARNING,
            name,
            "warning: any (one reading cannot tell whether they are new)",
            labels.get("memory", ""),
        )
        for labels, value in readings.get(ECC_ERRORS.name)
        if _double(labels) and value > 0
    ]


def _double(labels: Labels) -> bool:
    return labels.get("type") == "double_bit"


def network(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    out = [
        finding("link_down", "Network link down", labels, value, COUNT, ABNORMAL, "NPUNetworkLinkDown", "abnormal: link DOWN")
        for labels, value in readings.get(NETWORK_LINK_UP.name)
        if value == 0
    ]
    unhealthy = table.find("NPUNetworkUnhealthy")
    ok = tuple(unhealthy.param("ok_states", ("Success", "Init"))) if unhealthy else ("Success", "Init")
    out += [
        finding(
            "network_health",
            f"Network probe {labels.get('state', '?')}",
            labels,
            None,
            COUNT,
            WARNING,
            "NPUNetworkUnhealthy",
            f"healthy: {' or '.join(ok)}",
            "hccn_tool -net_health",
        )
        for labels, value in readings.get(NETWORK_HEALTH.name)
        if value == 1 and labels.get("state") not in ok
    ]
    return out + network_counters(readings, table)


def network_counters(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    if not readings.increases or not readings.seconds:
        return []
    out = []
    errors = table.find("NPUNetworkErrors")
    if errors is not None and errors.threshold is not None:
        kinds = set(errors.param("kinds", ()))
        per_port: dict[tuple[str, ...], tuple[Labels, float]] = {}
        for labels, value in readings.increases.get(NETWORK_ERRORS.name, ()):
            if labels.get("kind") in kinds:
                _, total = per_port.get(key(labels), (labels, 0.0))
                per_port[key(labels)] = (labels, total + value)
        for labels, total in per_port.values():
            rate = total / readings.seconds
            if rate > errors.threshold:
                out.append(
                    finding(
                        "network_errors",
                        "Network errors",
                        labels,
                        rate,
                        PER_SECOND,
                        WARNING,
                        errors.alert,
                        f"warning > {errors.threshold:g}/s",
                        f"{total:g} in the window",
                    )
                )
    flapping = table.find("NPUNetworkLinkFlapping")
    if flapping is not None and flapping.threshold is not None:
        downs = {key(labels): (labels, v) for labels, v in readings.increases.get(NETWORK_LINK_DOWN_TRANSITIONS.name, ())}
        ups = {key(labels): (labels, v) for labels, v in readings.increases.get(NETWORK_LINK_UP_TRANSITIONS.name, ())}
        for labels, changes in {**ups, **downs}.values():
            if changes >= flapping.threshold:
                out.append(
                    finding(
                        "link_flapping",
                        "Network link changes",
                        labels,
                        changes,
                        COUNT,
                        WARNING,
                        flapping.alert,
                        f"warning >= {flapping.threshold:g} in the window",
                    )
                )
    return out


def optics(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    present = {key(labels) for labels, value in readings.get(OPTICAL_PRESENT.name) if value == 1}
    out = []
    spec = table.find("NPUOpticalPowerOutOfRange")
    try:
        limits = optical_power_limits(spec) if spec else {}
    except GenerateError:
        limits = {}
    for direction, metric, _, _ in OPTICAL_POWER:
        if direction not in limits:
            continue
        low, high = limits[direction]
        for labels, watts in readings.get(metric):
            if present and key(labels) not in present:
                continue
            if not low <= watts <= high:
                dark = " (dark)" if watts <= 0 else ""
                out.append(
                    finding(
                        "optical_power",
                        f"Optical {direction} power (mW), lane {labels.get('lane', '?')}{dark}",
                        labels,
                        round(watts * 1000, 4),
                        COUNT,
                        WARNING,
                        "NPUOpticalPowerOutOfRange",
                        f"healthy {low * 1000:g} to {high * 1000:g} mW",
                    )
                )
    hot = table.find("NPUOpticalTemperatureHigh")
    return out + too_hot(readings, hot, OPTICAL_TEMPERATURE.name, "optical_temperature", "Optical module temperature")


def gaps(readings: HardwareReadings) -> list[Finding]:
    return [
        finding(
            "exporter_gap",
            "Exporter samples missing",
            f"{gap.instance or 'this node'}: exporter",
            gap.seconds,
            SECONDS,
            ABNORMAL if gap.trailing else WARNING,
            "CANNExporterDown",
            "warning: any gap; abnormal: still missing at the window's end",
            "no samples" + (" until the window's end" if gap.trailing else "") + " (an outage: rates and means across it are guesses)",
        )
        for gap in readings.gaps
    ]


# Abnormal verdicts that take the chip out of work (isolated pages or a bad link do not stop
# compute: a low utilization beside them is still worth judging).
DISABLING = ("health", "unreadable")


def faulty_chips(findings: Iterable[Finding]) -> dict[str, str]:
    """Chip subject -> the fault, for chips whose health or read says they cannot work."""
    out: dict[str, str] = {}
    for f in findings:
        if f.level == HARDWARE and f.verdict == ABNORMAL and f.check in DISABLING:
            chip = f.subject.split(" port ", 1)[0]
            out.setdefault(chip, f"{f.title}" + (f": {f.detail}" if f.detail else ""))
    return out
