"""Which collectors run: one `collector.NAME` switch per collector (flag, YAML key and
environment variable), as node_exporter has a `--collector.NAME` flag per collector.

Off means the collector's families are not described and its source never runs: no
subprocess, no socket, no file read. On, a source still follows its own options
(`hccn.enabled` auto runs hccn_tool only where it is installed, `podresources.enabled` auto
only inside Kubernetes, profiles need `profiles.dirs`, the ingest needs `ingest.enabled`).
npu-smi is the source of `devices` and `processes`, and lists the chips `network` and `pods`
ask about, so it runs while any of the four is on.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from exporter.core.options import option, parse_bool


@dataclass(frozen=True)
class CollectorOptions:
    """`collector.*`: switch a collector off (its series are not served, its source never runs)."""

    devices: bool = option(
        True, parse_bool, "per-chip metrics from npu-smi: identity, health, utilization, memory, power, temperature, ECC"
    )
    processes: bool = option(True, parse_bool, "per-process device memory from the npu-smi process table")
    network: bool = option(True, parse_bool, "RoCE/UB ports and optical modules from hccn_tool, where hccn.enabled allows")
    pods: bool = option(True, parse_bool, "chip-to-pod attribution from the kubelet, where podresources.enabled allows")
    profiles: bool = option(True, parse_bool, "profiler exports found under profiles.dirs")
    jobs: bool = option(
        True,
        parse_bool,
        "training-hook ingest (POST /api/v1/steps) and its npu_job_* metrics, where ingest.enabled allows",
        serve_only=True,
    )
    self: bool = option(True, parse_bool, "the exporter's own metrics: source health, build, web, process and Python runtime")


NAMES: tuple[str, ...] = tuple(f.name for f in fields(CollectorOptions))


def npu_smi_needed(collectors: CollectorOptions) -> bool:
    """npu-smi runs for its own collectors and for the chip list network and pods ask about."""
    return collectors.devices or collectors.processes or collectors.network or collectors.pods
