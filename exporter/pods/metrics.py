"""The pod attribution metrics: name, type, help, labels and the PodsPart field that fills each."""

from __future__ import annotations

from exporter.core.metric import CHIP_LABELS, spec

POD_INFO = spec(
    "npu_pod_info",
    "gauge",
    "Pod the chip is allocated to (kubelet pod-resources); value 1.",
    CHIP_LABELS + ("namespace", "pod", "container"),
    field=("namespace", "pod", "container"),
)
PODRESOURCES_UNMATCHED = spec(
    "cann_exporter_podresources_unmatched_devices",
    "gauge",
    "NPU devices the kubelet lists that are not attributed to any chip, by reason "
    "(no_chip: no chip with that id on this node; bad_device_id; unknown_resource).",
    ("reason",),
    field="unmatched",
)
POD_METRICS = (POD_INFO, PODRESOURCES_UNMATCHED)
