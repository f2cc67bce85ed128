"""Recording rules for energy and efficiency: watts from npu_energy_joules_total per chip, node,
namespace and training job, the share spent idle, joules per training iteration and per sample,
kWh over the rollup hour (for the capacity report), and model FLOPs utilization by namespace."""

from __future__ import annotations

from exporter.generate.common import CHIP, NODE, pct
from exporter.thresholds.records import JOULES_PER_KWH, NODE_IDLE_KWH, NODE_JOB_KWH, NODE_KWH, NODE_NAMESPACE_KWH
from exporter.thresholds.table import num

ENERGY = "npu_energy_joules_total"
# Per chip, 5m: watts, and watts while idle or in use below target.
RATE, IDLE = "chip:npu_energy_joules:rate5m", "chip:npu_energy_idle_joules:rate5m"
# Per training job, 5m: watts, joules per iteration and per sample (the jobs dashboard draws the last two).
JOB_RATE = "job_name:npu_energy_joules:rate5m"
PER_ITERATION = "job_name:npu_energy_joules_per_iteration:ratio5m"
PER_SAMPLE = "job_name:npu_energy_joules_per_sample:ratio5m"


def _per_job(value: str) -> str:
    """``value`` (per chip) once per training job reporting on the chip (npu_job_info's device)."""
    return f"{value}\n  * on (job, instance, device) group_right\n  group by (job, instance, device, job_name) (npu_job_info)"


def _per_namespace(value: str) -> str:
    return f"{value}\n  * on ({CHIP}) group_right\n  group by ({CHIP}, namespace) (npu_pod_info)"


# A job's iterations per second: its ranks step together (data parallel), so their mean; its
# samples per second: every rank's own batch, so their sum. A job that stopped stepping (or
# reports no samples) gets no figure rather than +Inf.
ITERATIONS_PER_SECOND = "avg by (job_name) (rate(npu_job_iterations_total[5m]))"
SAMPLES_PER_SECOND = "sum by (job_name) (rate(npu_job_samples_total[5m]))"

# MFU per rank, joined to the namespace of the rank's chip: npu_job_info's device, then npu_pod_info.
MFU_BY_NAMESPACE = (
    "avg by (namespace) (\n"
    "  npu_job_model_flops_utilization_ratio\n"
    "  * on (job, instance, job_name, rank) group_left (device) group by (job, instance, job_name, rank, device) (npu_job_info)\n"
    "  * on (job, instance, device) group_left (namespace) group by (job, instance, device, namespace) (npu_pod_info)\n"
    ")"
)


def energy_5m(threshold: float) -> list[tuple[str, str, str]]:
    """(record, expr, help) of the 5m group: after chip:npu_in_use:bool and the 5m utilization."""
    return [
        (RATE, f"rate({ENERGY}[5m])", "power of each chip from its energy counter, watts (5m)"),
        (
            IDLE,
            f"{RATE}\n  * on ({CHIP})\n  (1 - chip:npu_in_use:bool * on ({CHIP}) (chip:npu_aicore_utilization_ratio:avg5m >= bool {num(threshold)}))",
            f"power of each chip while idle or in use below {pct(threshold)} (NPULowUtilization's bound), watts (5m)",
        ),
        ("instance:npu_energy_joules:rate5m", f"sum by ({NODE}) ({RATE})", "power of a node's chips, watts (5m)"),
        (
            "namespace:npu_energy_joules:rate5m",
            f"sum by (namespace) (\n  {_per_namespace(RATE)}\n)",
            "power of a namespace's chips (kubelet), watts",
        ),
        (
            JOB_RATE,
            f"sum by (job_name) (\n  {_per_job(RATE)}\n)",
            "power of a training job's chips (npu_job_info device), watts",
        ),
        (
            PER_ITERATION,
            f"{JOB_RATE}\n  / on (job_name)\n  ({ITERATIONS_PER_SECOND} > 0)",
            "energy of a training job's chips per iteration, joules (watts / iterations per second, the mean over its ranks; 5m)",
        ),
        (
            PER_SAMPLE,
            f"{JOB_RATE}\n  / on (job_name)\n  ({SAMPLES_PER_SECOND} > 0)",
            "energy of a training job's chips per sample, joules (watts / samples per second summed over its ranks; 5m; "
            "loops that pass samples= only)",
        ),
        ("cluster:npu_energy_joules:rate5m", f"sum by () ({RATE})", "power of the cluster's chips, watts (5m)"),
        (
            "cluster:npu_energy_idle_joules:rate5m",
            f"sum by () ({IDLE})",
            f"power of the cluster's chips idle or below {pct(threshold)}, watts",
        ),
        (
            "namespace:npu_job_model_flops_utilization_ratio:avg",
            MFU_BY_NAMESPACE,
            "mean model FLOPs utilization of the training ranks on a namespace's chips (npu_job_info device, kubelet)",
        ),
    ]


def energy_1h() -> list[tuple[str, str, str]]:
    """(record, expr, help) of the hourly rollups: kWh over the last hour."""
    kwh = num(JOULES_PER_KWH)
    chip = f"increase({ENERGY}[1h]) / {kwh}"
    return [
        ("chip:npu_energy_kwh:sum1h", chip, "energy of each chip over the last hour, kWh"),
        (
            "chip:npu_energy_idle_kwh:sum1h",
            f"avg_over_time({IDLE}[1h]) * 3600 / {kwh}",
            "energy of each chip spent idle or below target over the last hour, kWh",
        ),
        (
            NODE_KWH,
            f"sum by ({NODE}) (chip:npu_energy_kwh:sum1h)",
            "energy of a node's chips over the last hour, kWh",
        ),
        (
            "namespace:npu_energy_kwh:sum1h",
            f"sum by (namespace) (\n  {_per_namespace('chip:npu_energy_kwh:sum1h')}\n)",
            "energy of a namespace's chips over the last hour, kWh",
        ),
        (
            "job_name:npu_energy_kwh:sum1h",
            f"sum by (job_name) (\n  {_per_job('chip:npu_energy_kwh:sum1h')}\n)",
            "energy of a training job's chips over the last hour, kWh",
        ),
        ("cluster:npu_energy_kwh:sum1h", "sum by () (chip:npu_energy_kwh:sum1h)", "energy of the cluster's chips over the last hour, kWh"),
        # per node as well, so that `report` reads node-sized answers (its --selector still
        # matching job and instance) rather than one series per chip
        (
            NODE_IDLE_KWH,
            f"sum by ({NODE}) (chip:npu_energy_idle_kwh:sum1h)",
            "energy of a node's chips spent idle or below target over the last hour, kWh",
        ),
        (
            NODE_NAMESPACE_KWH,
            f"sum by ({NODE}, namespace) (\n  {_per_namespace('chip:npu_energy_kwh:sum1h')}\n)",
            "energy of a namespace's chips on a node over the last hour, kWh",
        ),
        (
            NODE_JOB_KWH,
            f"sum by ({NODE}, job_name) (\n  {_per_job('chip:npu_energy_kwh:sum1h')}\n)",
            "energy of a training job's chips on a node over the last hour, kWh",
        ),
        (
            "cluster:npu_energy_idle_kwh:sum1h",
            "sum by () (chip:npu_energy_idle_kwh:sum1h)",
            "energy the cluster's chips spent idle or below target over the last hour, kWh",
        ),
    ]
