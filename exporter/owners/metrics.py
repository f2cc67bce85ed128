"""The owner metrics: name, type, help, labels and the OwnersPart field that fills each."""

from __future__ import annotations

from exporter.core.metric import CHIP_LABELS, spec

OWNER_LABELS = ("runtime", "owner", "namespace", "pod", "container", "job_id", "user", "unit")
OWNER_INFO = spec(
    "npu_chip_owner_info",
    "gauge",
    "Who holds the chip, through the cgroup of each process npu-smi shows on it (or a Slurm prolog's mapping): "
    "runtime kubernetes, docker, containerd, podman, slurm, systemd or host; owner is one name to print "
    "(the pod, the container's name or id, `slurm job J (user)`, the unit); a label the runtime has no value "
    "for is empty; value 1.",
    CHIP_LABELS + OWNER_LABELS,
    field=OWNER_LABELS,
)
PIDS_SKIPPED = spec(
    "cann_exporter_owner_pids_skipped_total",
    "counter",
    "Processes npu-smi shows whose owner was not read, by reason (vanished: exited before its cgroup was read; "
    "reused: its pid taken by another process meanwhile; too_large, permission_denied, unreadable, garbled: its "
    "files; too_many: over the per-run bound).",
    ("reason",),
    field="skipped",
)
NAME_LOOKUP_FAILURES = spec(
    "cann_exporter_owner_name_lookup_failures_total",
    "counter",
    "Container-name requests to an engine's socket (owners.docker_socket, owners.podman_socket, "
    "owners.containerd_socket) that got no name, by runtime and reason (timeout, unavailable, not_found, refused, "
    "garbled): the container is shown by id.",
    ("runtime", "reason"),
    field="lookup_failures",
)
OWNER_METRICS = (OWNER_INFO, PIDS_SKIPPED, NAME_LOOKUP_FAILURES)

OWNER_NOTE = """\
## Chip owners

`npu_chip_owner_info` has one series per chip and owner; the chips' own series never carry an
owner label: rules and dashboards join on `npu`, `chip` and `device`, e.g.
`npu_hbm_used_bytes * on(npu, chip, device) group_left(runtime, owner) npu_chip_owner_info`.
Every runtime has the same labels, empty where it has no value. For Kubernetes, `namespace` and
`pod` come from the kubelet's pod-resources (`collector.pods`) when exactly one pod holds the
chip; `container` is the container id the cgroup names, for every container runtime (the name,
where the engine answered, is the `owner`). How each runtime is recognised:
[formats/owners.md](formats/owners.md).
"""
