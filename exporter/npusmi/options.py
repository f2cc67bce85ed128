"""`npu_smi.*`: where npu-smi is, how often it is asked and how each call is bounded."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import (
    option,
    optional_text,
    parse_bool,
    parse_duration,
    parse_positive_int,
    parse_text,
    subset,
    whole_number,
)
from exporter.core.registration import Section
from exporter.core.runner import nice_option
from exporter.npusmi.peak import parse_overrides

MAX_EXPECTED_CHIPS = 1024  # far above any node (16 dies on an Atlas A3), far below a typo's digits


parse_count = whole_number(0, MAX_EXPECTED_CHIPS)  # chips this node should have; 0: none
# Where sysfs is mounted; left so under --simulate, the simulated model's own tree is read instead.
DEFAULT_SYSFS = "/sys"


# The per-card `-t` queries the source knows (current-fault-event only Ascend 950 answers: the
# others' "does not support" is remembered per card); health is per chip, and only for chips not OK.
CARD_KINDS = ("usages", "common", "ecc", "memory", "current-fault-event")
# The per-chip health and interconnect queries (queries.py; spod-info at inventory time); each is
# asked only where the product answers it (a "does not support querying" answer is remembered).
HARDWARE_KINDS = ("volt", "pcie-err", "sensors", "sio-info", "hccs", "hccs-bw", "spod-info")
DETAIL_KINDS = (*CARD_KINDS, "health", *HARDWARE_KINDS)
OPT_IN_KINDS = ("memory",)  # not in the default list


@dataclass(frozen=True)
class NpuSmiOptions:
    path: str = option("npu-smi", parse_text, "npu-smi binary (name on PATH or a path)", flag="--npu-smi", metavar="PATH")
    timeout: float = option("10s", parse_duration, "kill an npu-smi call after this long", metavar="DURATION")
    interval: float = option(
        "10s", parse_duration, "how often `npu-smi info` reads every chip", metavar="DURATION", serve_only=True, live=True
    )
    detail_interval: float = option(
        "60s", parse_duration, "how often the per-card `-t` details are read", metavar="DURATION", serve_only=True, live=True
    )
    inventory_interval: float = option(
        "1h",
        parse_duration,
        "how often `info -m` and board ids are re-read (also on chip-set change)",
        metavar="DURATION",
        serve_only=True,
        live=True,
    )
    device_wait: float = option(
        "60s",
        parse_duration,
        "a chip is served only once its device id is known (`info -m`): after this long without it, its position among the chips",
        metavar="DURATION",
        serve_only=True,
    )
    details: tuple[str, ...] = option(
        ",".join(k for k in DETAIL_KINDS if k not in OPT_IN_KINDS),
        subset(*DETAIL_KINDS),
        "`-t` queries: "
        + ",".join(CARD_KINDS)
        + " per card; health per chip, only when not OK; "
        + ",".join(HARDWARE_KINDS)
        + " per chip where the product answers them (pcie-err falls back to err-count on Atlas 310)",
        metavar="LIST",
    )
    fault_codes: str | None = option(
        None,
        optional_text,
        "fault-code table (JSON, the shape of the shipped one) used instead of the shipped table",
        metavar="FILE",
        live=True,
    )
    hardware_interval: float = option(
        "60s",
        parse_duration,
        "how often the per-chip volt, pcie-err, sensors, sio-info and hccs queries run",
        metavar="DURATION",
        serve_only=True,
        live=True,
    )
    hccs_bw_interval: float = option(
        "120s",
        parse_duration,
        "how often `-t hccs-bw` samples each chip's HCCS bandwidth, one chip at a time",
        metavar="DURATION",
        serve_only=True,
        live=True,
    )
    hccs_bw_time: float = option(
        "1s", parse_duration, "how long each `-t hccs-bw` call samples (its -time; the call blocks that long)", metavar="DURATION"
    )
    board: bool = option(True, parse_bool, "read `-t board -c` per chip at inventory time (die ids)")
    max_concurrency: int = option(
        4, parse_positive_int, "npu-smi calls running at once (one of them kept for `npu-smi info`, the utilization read)", metavar="N"
    )
    nice: int = nice_option("npu-smi")
    max_output_bytes: int = option(4 << 20, parse_positive_int, "larger npu-smi outputs are discarded", metavar="BYTES")
    expected_devices: int = option(
        0, parse_count, 'chips this node should have (npu_expected_devices{source="config"}; NPUMissing); 0: none', metavar="N"
    )
    sysfs: str = option(
        DEFAULT_SYSFS,
        parse_text,
        'sysfs mount point; Ascend PCI functions under bus/pci/devices give npu_expected_devices{source="pci"} '
        "(under --simulate, left at /sys: the simulated model's tree)",
        metavar="DIR",
    )
    peak_flops: tuple[tuple[str, str, float], ...] = option(
        "",
        parse_overrides,
        "peak FLOP/s to add to or replace in the shipped table, MODEL:PRECISION=FLOPS items (910B3:bf16=3.13e14); "
        "model as npu-smi names it (at most 64 characters), precision fp32, bf16, fp16 or int8; at most 256 items, "
        "each model and precision once",
        metavar="LIST",
    )


NPU_SMI_OPTIONS = Section("npu_smi", NpuSmiOptions)
