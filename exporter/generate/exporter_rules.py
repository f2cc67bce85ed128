"""Alert builders for the exporter itself (the cann-exporter-self group): a failing source, the
exporter down (handover.py), close to its memory or file-descriptor limit, serving simulated
chips. Spec + table -> (expr, summary, description); rules.py puts the groups together."""

from __future__ import annotations

from exporter.generate.common import Built, pct
from exporter.generate.handover import exporter_down_alert
from exporter.generate.source_failing import source_failing_description
from exporter.thresholds.table import AlertSpec, Thresholds, num


def _source_failing(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "cann_exporter_source_success == 0",
        "cann-exporter source {{ $labels.source }} is failing on {{ $labels.instance }}",
        source_failing_description(spec.window),
    )


def _memory_high(spec: AlertSpec, table: Thresholds) -> Built:
    # Only where the exporter reports a cgroup limit: the division drops every other target.
    expr = f"process_resident_memory_bytes / cann_exporter_memory_limit_bytes > {num(spec.threshold)}"
    return (
        expr,
        "cann-exporter on {{ $labels.instance }} is close to its memory limit",
        (
            f"The exporter on {{{{ $labels.instance }}}} has used {{{{ $value | humanizePercentage }}}} of its cgroup "
            f"memory limit for {spec.window} (threshold {pct(spec.threshold)}); at the limit the kernel kills it and "
            f"every NPU metric and alert of the node goes with it."
        ),
    )


def _fds_high(spec: AlertSpec, table: Thresholds) -> Built:
    # process_* series of other exporters are left out by the join on the exporter's build info.
    expr = f"process_open_fds / process_max_fds > {num(spec.threshold)}\nand on (job, instance) cann_exporter_build_info"
    return (
        expr,
        "cann-exporter on {{ $labels.instance }} is running out of file descriptors",
        (
            f"The exporter on {{{{ $labels.instance }}}} has {{{{ $value | humanizePercentage }}}} of its maximum file "
            f"descriptors open for {spec.window} (threshold {pct(spec.threshold)}); when none is left, npu-smi calls "
            f"and scrapes fail."
        ),
    )


def _simulated(spec: AlertSpec, table: Thresholds) -> Built:
    return (
        "cann_exporter_simulated == 1",
        "cann-exporter on {{ $labels.instance }} serves SIMULATED chips",
        (
            f"The exporter on {{{{ $labels.instance }}}} has served data from its built-in simulator (scenario "
            f"{{{{ $labels.scenario }}}}, model {{{{ $labels.model }}}}) for {spec.window}: its chips, utilization and "
            f"alerts are not real hardware. Remove --simulate (and CANN_EXPORTER_SIMULATOR_SCENARIO) on a real node."
        ),
    )


BUILDERS = {
    "CANNExporterSourceFailing": _source_failing,
    "CANNExporterDown": exporter_down_alert,
    "CANNExporterMemoryHigh": _memory_high,
    "CANNExporterFileDescriptorsHigh": _fds_high,
    "CANNExporterSimulated": _simulated,
}
NO_THRESHOLD = {"CANNExporterSourceFailing", "CANNExporterDown", "CANNExporterSimulated"}
NEEDS_RANGE: set[str] = set()
GROUP = ("cann-exporter-self", tuple(BUILDERS))
