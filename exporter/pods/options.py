"""`podresources.*`: whether and how the kubelet is asked which pod holds each chip."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import (
    auto_bool,
    choice,
    option,
    parse_duration,
    parse_text,
    text_list,
)
from exporter.core.registration import Section
from exporter.pods.kubelet import DEFAULT_RESOURCES, DEFAULT_SOCKET

# What the number ending a kubelet device id is: the chip's physical id (the Ascend device
# plugin's naming) or its logic id (plugins that number by logic id).
MATCH_ON = ("physical", "logic")


@dataclass(frozen=True)
class PodsOptions:
    enabled: bool | None = option(
        "auto",
        auto_bool,
        "attribute chips to pods via the kubelet pod-resources API (auto: inside Kubernetes; YAML and env take auto, true, false)",
    )
    socket: str = option(DEFAULT_SOCKET, parse_text, "kubelet pod-resources socket", metavar="PATH")
    timeout: float = option("3s", parse_duration, "bound on one List call", metavar="DURATION")
    interval: float = option("15s", parse_duration, "how often the kubelet is asked", metavar="DURATION", serve_only=True)
    ttl: float = option(
        "60s", parse_duration, "an answer is used this long; then attribution is dropped", metavar="DURATION", serve_only=True
    )
    resources: tuple[str, ...] = option(
        ",".join(DEFAULT_RESOURCES), text_list, "device-plugin resource names (virtual slices <name>-* included)", metavar="LIST"
    )
    device_id: str = option(
        "physical",
        choice(*MATCH_ON),
        "what the number ending a device id is: the chip's physical id (Ascend device plugin) or its logic id",
    )
    max_message_bytes: int = 16 << 20  # a larger kubelet answer is refused (not an option)


PODS_OPTIONS = Section("podresources", PodsOptions)
