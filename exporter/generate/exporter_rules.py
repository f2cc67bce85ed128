"""Alert builders for the exporter itself (the cann-exporter-self group): a failing source, the
exporter down (handover.py), close to its memory or file-descriptor limit, serving simulated
chips. Spec + table -> (expr, summary, description); rules.py puts the groups together."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.generate.common import Built, Held, pct
from exporter.generate.handover import exporter_down_alert
from exporter.generate.source_failing import source_failing_description
from exporter.generate.texts import SHARE
from exporter.thresholds.table import AlertSpec, Thresholds, num

ON_INSTANCE = "cann-exporter on {{ $labels.instance }}"


def _source_failing(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "cann_exporter_source_success == 0",
        "cann-exporter source {{ $labels.source }} is failing on {{ $labels.instance }}",
        source_failing_description(spec.window),
    )


@dataclass(frozen=True)
class _NearLimit:
    """The exporter's use of a limit (``ratio``, on the targets ``only`` keeps) above the alert's
    threshold: what it has ``used`` of the limit, and what happens ``then``, at the limit."""

    ratio: str
    summary: str
    used: str
    then: str
    only: str = ""

    def __call__(self, spec: AlertSpec, table: Thresholds) -> Built:
        return (
            f"{self.ratio} > {num(spec.bound)}{self.only}",
            f"{ON_INSTANCE} {self.summary}",
            f"The exporter on {{{{ $labels.instance }}}} has {self.used} for {spec.window} (threshold {pct(spec.bound)}); {self.then}.",
        )


# Only where the exporter reports a cgroup limit: the division drops every other target.
MEMORY_HIGH = _NearLimit(
    "process_resident_memory_bytes / cann_exporter_memory_limit_bytes",
    "is close to its memory limit",
    f"used {SHARE} of its cgroup memory limit",
    "at the limit the kernel kills it and every NPU metric and alert of the node goes with it",
)
# process_* series of other exporters are left out by the join on the exporter's build info.
FDS_HIGH = _NearLimit(
    "process_open_fds / process_max_fds",
    "is running out of file descriptors",
    f"{SHARE} of its maximum file descriptors open",
    "when none is left, npu-smi calls and scrapes fail",
    "\nand on (job, instance) cann_exporter_build_info",
)


SIMULATED = Held(
    "cann_exporter_simulated == 1",
    f"{ON_INSTANCE} serves SIMULATED chips",
    "The exporter on {{ $labels.instance }} has served data from its built-in simulator (scenario {{ $labels.scenario }}, model {{ $labels.model }})",
    "its chips, utilization and alerts are not real hardware. Remove --simulate (and CANN_EXPORTER_SIMULATOR_SCENARIO) on a real node",
)


BUILDERS = {
    "CANNExporterSourceFailing": _source_failing,
    "CANNExporterDown": exporter_down_alert,
    "CANNExporterMemoryHigh": MEMORY_HIGH,
    "CANNExporterFileDescriptorsHigh": FDS_HIGH,
    "CANNExporterSimulated": SIMULATED,
}
NO_THRESHOLD = {"CANNExporterSourceFailing", "CANNExporterDown", "CANNExporterSimulated"}
NEEDS_RANGE: set[str] = set()
GROUP = ("cann-exporter-self", tuple(BUILDERS))
