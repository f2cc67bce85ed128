"""The hardware level beyond ECC pages: what the hardware alerts page on, judged from the
latest readings (and the increase of counters) that every reader hands over in one shape.

Pure: a HardwareReadings in, findings out. The verdicts follow the alerts' thresholds from
the same table (NPUUnhealthy, NPUNeedsIsolation, NPUMissing, NPUNetwork*, NPUOptical*, NPUTemperatureHigh,
NPUECCDoubleBitErrors, CANNExporterSourceFailing, CANNExporterDown), so `diagnose` names what
the alerts name. A chip with an abnormal verdict here gets hardware advice (hardware_advice.py); its low
utilization is a consequence, not a pipeline problem (analysis.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from exporter.core import faultlevels
from exporter.diagnostics.model import (
    COUNT,
    HARDWARE,
    PER_SECOND,
    SECONDS,
    Finding,
    HardwareReadings,
    Labels,
    chip_subject,
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
    AlertSpec,
    GenerateError,
    Thresholds,
)

SUBJECT_FAILING = "cann_exporter_source_subject_failing"
PEAK_DEVICES = "npu_devices:peak"  # most chips listed within the window (NPUMissing without an expectation)
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
)
# Read as their increase over the window (counters).
INCREASES = (NETWORK_ERRORS.name, NETWORK_LINK_DOWN_TRANSITIONS.name, NETWORK_LINK_UP_TRANSITIONS.name, ECC_ERRORS.name)


def _subject(labels: Labels) -> str:
    where = chip_subject(labels.get("instance", ""), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))
    return where + (f" port {labels['port']}" if labels.get("port") else "")


def _instance(labels: Labels) -> str:
    return labels.get("instance", "") or "this node"


def _finding(
    check: str,
    title: str,
    labels: Labels | str,
    value: float | None,
    unit: str,
    verdict: str | None,
    alert: str | None,
    bounds: str = "",
    detail: str = "",
) -> Finding:
    subject = labels if isinstance(labels, str) else _subject(labels)
    return Finding(HARDWARE, check, title, subject, value, unit, verdict, None, alert, bounds, detail)


def by_subject(findings: Iterable[Finding]) -> list[Finding]:
    """Findings grouped by subject in natural order (NPU 2 before NPU 10), stable within one."""

    def key(f: Finding) -> tuple[object, ...]:
        return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", f.subject))

    return sorted(findings, key=key)


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
        *gaps(readings),
    ]


def _key(labels: Labels) -> tuple[str, ...]:
    return tuple(labels.get(k, "") for k in ("instance", "npu", "chip", "device", "port"))


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
            codes.setdefault(_key(labels), []).append(labels.get("code", "?") + level)
    levels = {_key(labels): labels.get("level", "") for labels, value in readings.get(FAULT_LEVEL.name) if value == 1}
    out = []
    for labels, value in readings.get(HEALTH.name):
        if value != 1:
            continue
        state = labels.get("state", "?")
        level = levels.get(_key(labels), "")
        verdict = ABNORMAL if state in paging or level in isolating else HEALTHY if state == "OK" else WARNING
        found = sorted(codes.get(_key(labels), []))
        detail = f"state {state}"
        if level and level != faultlevels.NONE:
            detail += f", fault level {level}: {faultlevels.action(level)}"
        detail += f", error codes {', '.join(found)}" if found else ""
        alert = "NPUNeedsIsolation" if isolation and level in isolating else "NPUUnhealthy" if spec else None
        title = f"Health {state}" + (f", fault level {level}" if level and level != faultlevels.NONE else "")
        bounds = "abnormal: " + ", ".join((" or ".join(paging), *((" or ".join(isolating),) if isolating else ())))
        out.append(_finding("health", title, labels, None, COUNT, verdict, alert, bounds, detail))
    return sorted(out, key=lambda f: f.subject)


def unreadable(readings: HardwareReadings) -> list[Finding]:
    return [
        _finding(
            "unreadable", "Chip could not be read (npu_up 0)", labels, value, COUNT, ABNORMAL, None, "abnormal: the latest read failed"
        )
        for labels, value in readings.get(UP.name)
        if value == 0
    ]


def missing(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Chips listed against the expected count (config, else PCI), else against the most listed
    within the window, per exporter (NPUMissing)."""
    spec = table.find("NPUMissing")
    expected: dict[str, tuple[float, str]] = {}
    for labels, value in readings.get(EXPECTED_DEVICES.name):
        source = labels.get("source", "")
        if _instance(labels) not in expected or source == "config":
            expected[_instance(labels)] = (value, f"npu_expected_devices, source {source}")
    for labels, value in readings.get(PEAK_DEVICES):
        expected.setdefault(_instance(labels), (value, "the most it listed in the window"))
    out = []
    for labels, seen in readings.get(DEVICES.name):
        want, basis = expected.get(_instance(labels), (None, ""))
        if want is None:
            continue
        gone = want - seen
        out.append(
            _finding(
                "missing",
                "Chips missing",
                f"{_instance(labels)}: chips",
                max(0.0, gone),
                COUNT,
                ABNORMAL if gone > 0 else HEALTHY,
                "NPUMissing" if spec else None,
                "abnormal: fewer chips than expected",
                f"{seen:g} listed by npu-smi, {want:g} expected ({basis})",
            )
        )
    return out


def read_failures(readings: HardwareReadings) -> list[Finding]:
    """npu-smi commands failing on a card, with the reason (cann_exporter_source_subject_failing)."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for labels, value in readings.get(SUBJECT_FAILING):
        if value == 1:
            where = f"{_instance(labels)}: {labels.get('source', '?')}"
            reasons.setdefault((where, labels.get("reason", "?")), []).append(labels.get("subject", "?"))
    return [
        _finding(
            "read_failure",
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


def too_hot(readings: HardwareReadings, spec: AlertSpec | None, metric: str, check: str, title: str) -> list[Finding]:
    """A warning for each reading of ``metric`` (°C) above the alert's threshold."""
    if spec is None or spec.threshold is None:
        return []
    bounds = f"warning > {spec.threshold:g} °C"
    return [
        _finding(check, title, labels, value, COUNT, WARNING, spec.alert, bounds, f"{value:g} °C")
        for labels, value in readings.get(metric)
        if value > spec.threshold
    ]


def ecc_double_bit(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """Uncorrectable errors: new ones within the window page (NPUECCDoubleBitErrors); with one
    reading, a non-zero current count is told but cannot be dated."""
    spec = table.find("NPUECCDoubleBitErrors")
    name = spec.alert if spec else None
    if readings.increases:
        return [
            _finding(
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
        _finding(
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
        _finding("link_down", "Network link down", labels, value, COUNT, ABNORMAL, "NPUNetworkLinkDown", "abnormal: link DOWN")
        for labels, value in readings.get(NETWORK_LINK_UP.name)
        if value == 0
    ]
    unhealthy = table.find("NPUNetworkUnhealthy")
    ok = tuple(unhealthy.param("ok_states", ("Success", "Init"))) if unhealthy else ("Success", "Init")
    out += [
        _finding(
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
                _, total = per_port.get(_key(labels), (labels, 0.0))
                per_port[_key(labels)] = (labels, total + value)
        for labels, total in per_port.values():
            rate = total / readings.seconds
            if rate > errors.threshold:
                out.append(
                    _finding(
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
        downs = {_key(labels): (labels, v) for labels, v in readings.increases.get(NETWORK_LINK_DOWN_TRANSITIONS.name, ())}
        ups = {_key(labels): (labels, v) for labels, v in readings.increases.get(NETWORK_LINK_UP_TRANSITIONS.name, ())}
        for labels, changes in {**ups, **downs}.values():
            if changes >= flapping.threshold:
                out.append(
                    _finding(
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
    present = {_key(labels) for labels, value in readings.get(OPTICAL_PRESENT.name) if value == 1}
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
            if present and _key(labels) not in present:
                continue
            if not low <= watts <= high:
                dark = " (dark)" if watts <= 0 else ""
                out.append(
                    _finding(
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
        _finding(
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
