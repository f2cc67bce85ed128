"""The kubelet's registration: which pod holds each chip (`collector.pods`), matched to the
chips npu-smi lists. `podresources.enabled` auto asks the kubelet only inside Kubernetes."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.snapshot import Snapshot
from exporter.core.source import Derived, Source
from exporter.npusmi.part import DEVICES
from exporter.pods.collector import PodCollector
from exporter.pods.options import PODS_OPTIONS, PodsOptions
from exporter.pods.part import PODS, PodsPart
from exporter.pods.source import PodResourcesSource, in_kubernetes


def build(b: Build[PodsOptions]) -> Source | None:
    enabled = b.options.enabled if b.on("pods") else False
    if not (in_kubernetes() if enabled is None else enabled):
        return None
    source = PodResourcesSource(b.options, b.health)

    def make(earlier: Snapshot) -> PodsPart:
        devices = earlier.get(DEVICES)
        return source.part(devices.chips if devices is not None else ())

    return Derived(PODS.name, make, source)


def describe(b: Build[PodsOptions], source: Source | None) -> str:
    if source is not None:
        return f"kubelet pod-resources: {b.options.socket}"
    return "podresources.enabled is false" if b.options.enabled is False else "not in Kubernetes (podresources.enabled auto)"


SWITCH = Switch("pods", "chip-to-pod attribution from the kubelet, where podresources.enabled allows")
REGISTRATION = Registration(PODS, build, (Collect(SWITCH.name, PodCollector),), PODS_OPTIONS, (SWITCH,), describe, needs=(DEVICES.name,))
