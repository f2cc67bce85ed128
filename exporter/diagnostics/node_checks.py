"""The node's other paging alerts at the hardware level, judged with the table's thresholds:
HBM almost full per chip (NPUHBMAlmostFull), PFC storms per port (NPUNetworkPFCStorm), and the
exporter itself: its memory against its cgroup limit (CANNExporterMemoryHigh), its file
descriptors (CANNExporterFileDescriptorsHigh) and simulated chips (CANNExporterSimulated: every
verdict beside it describes no real hardware). Pure: HardwareReadings in, findings out."""

from __future__ import annotations

from exporter.core.selfmetrics import BUILD_INFO, SIMULATED
from exporter.diagnostics.hardware_base import exporter_subject, finding, key, paged
from exporter.diagnostics.model import COUNT, PER_SECOND, RATIO, Finding, HardwareReadings, Labels
from exporter.diagnostics.verdicts import pct
from exporter.hccn.metrics import NETWORK_PACKETS
from exporter.npusmi.metrics import HBM_TOTAL, HBM_USED
from exporter.resources.metrics import MAX_FDS, MEMORY_LIMIT, OPEN_FDS, RESIDENT_MEMORY
from exporter.thresholds.table import HEALTHY, Thresholds

LATEST = (
    HBM_USED.name,
    HBM_TOTAL.name,
    RESIDENT_MEMORY.name,
    MEMORY_LIMIT.name,
    OPEN_FDS.name,
    MAX_FDS.name,
    SIMULATED.name,
    BUILD_INFO.name,
)
INCREASES = (NETWORK_PACKETS.name,)
PFC = "pfc"  # npu_network_packets_total{kind}: the PFC pause frames NPUNetworkPFCStorm counts
# What of a series the checks read, where less than all of it (Prometheus asks only for that).
ONLY = {NETWORK_PACKETS.name: f'kind="{PFC}"'}


def node_findings(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    return [*hbm_full(readings, table), *pfc_storm(readings, table), *exporter_limits(readings, table), *simulated(readings, table)]


def hbm_full(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    spec = table.find("NPUHBMAlmostFull")
    if spec is None or spec.threshold is None:
        return []
    total = {key(labels): value for labels, value in readings.get(HBM_TOTAL.name)}
    out = []
    for labels, used in readings.get(HBM_USED.name):
        size = total.get(key(labels))
        if size and used / size > spec.threshold:
            detail = f"{used / 2**30:.1f} of {size / 2**30:.1f} GiB in use"
            bounds = f"{paged(spec)} > {pct(spec.threshold)}"
            out.append(finding("hbm_full", "HBM in use", labels, used / size, RATIO, paged(spec), spec.alert, bounds, detail))
    return out


def pfc_storm(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """PFC pause frames per second over the window, received and sent, per port."""
    spec = table.find("NPUNetworkPFCStorm")
    if spec is None or spec.threshold is None or not readings.increases or not readings.seconds:
        return []
    per_port: dict[tuple[str, ...], tuple[Labels, float]] = {}
    for labels, value in readings.increases.get(NETWORK_PACKETS.name, ()):
        if labels.get("kind") == PFC:
            _, sum_ = per_port.get(key(labels), (labels, 0.0))
            per_port[key(labels)] = (labels, sum_ + value)
    return [
        finding(
            "pfc_storm",
            "PFC pause frames",
            labels,
            frames / readings.seconds,
            PER_SECOND,
            paged(spec),
            spec.alert,
            f"{paged(spec)} > {spec.threshold:g}/s",
            f"{frames:g} received and sent in the window",
        )
        for labels, frames in per_port.values()
        if frames / readings.seconds > spec.threshold
    ]


def _exporters(readings: HardwareReadings) -> set[tuple[str, str]]:
    """(job, instance) of the targets that are cann-exporters (process_* of others left out)."""
    return {(labels.get("job", ""), labels.get("instance", "")) for labels, _ in readings.get(BUILD_INFO.name)}


def exporter_limits(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    """The exporter's resident memory against its cgroup limit and its open file descriptors
    against their maximum; a target without a limit has no memory finding."""
    exporters = _exporters(readings)
    out = []
    for check, alert, used, limit, title, unit in (
        (
            "exporter_memory",
            "CANNExporterMemoryHigh",
            RESIDENT_MEMORY.name,
            MEMORY_LIMIT.name,
            "Exporter memory (of its cgroup limit)",
            "MiB",
        ),
        (
            "exporter_fds",
            "CANNExporterFileDescriptorsHigh",
            OPEN_FDS.name,
            MAX_FDS.name,
            "Exporter file descriptors (of the maximum)",
            "open",
        ),
    ):
        spec = table.find(alert)
        if spec is None or spec.threshold is None:
            continue
        limits = {(labels.get("job", ""), labels.get("instance", "")): value for labels, value in readings.get(limit)}
        for labels, value in readings.get(used):
            target = (labels.get("job", ""), labels.get("instance", ""))
            top = limits.get(target)
            if target not in exporters or not top:
                continue
            scale = 2**20 if unit == "MiB" else 1
            verdict = paged(spec) if value / top > spec.threshold else HEALTHY
            detail = f"{value / scale:.0f} of {top / scale:.0f} {unit}"
            bounds = f"{paged(spec)} > {pct(spec.threshold)}"
            out.append(finding(check, title, exporter_subject(labels), value / top, RATIO, verdict, spec.alert, bounds, detail))
    return out


def simulated(readings: HardwareReadings, table: Thresholds) -> list[Finding]:
    spec = table.find("CANNExporterSimulated")
    if spec is None:
        return []
    return [
        finding(
            "simulated",
            "Serves SIMULATED chips",
            exporter_subject(labels),
            None,
            COUNT,
            paged(spec),
            spec.alert,
            f"{paged(spec)}: the built-in simulator, not npu-smi",
            f"scenario {labels.get('scenario', '?')}, model {labels.get('model', '?')}: the chips and verdicts here are no real hardware",
        )
        for labels, value in readings.get(SIMULATED.name)
        if value == 1
    ]
