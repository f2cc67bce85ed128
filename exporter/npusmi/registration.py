"""npu-smi's registration: the chips (`collector.devices`) and their processes
(`collector.processes`). npu-smi also lists the chips that hccn_tool and the kubelet's devices
are matched to, so it runs while any collector that reads the chips is on."""

from __future__ import annotations

from dataclasses import replace

from exporter.core.registration import Build, Collect, Registration, Switch, Tool
from exporter.core.runner import CommandRunner
from exporter.core.source import Derived, Sampled, Source
from exporter.npusmi.collector import ChipsCollector, ProcessesCollector
from exporter.npusmi.metrics import ECC_NOTE, ENERGY_NOTE, FAULT_NOTE
from exporter.npusmi.options import DEFAULT_SYSFS, NPU_SMI_OPTIONS, NpuSmiOptions
from exporter.npusmi.part import DEVICES
from exporter.npusmi.peak import table_note
from exporter.npusmi.source import NpuSmiSource


def build(b: Build[NpuSmiOptions]) -> Source:
    options = b.options
    if not b.on("devices"):
        options = replace(options, details=(), board=False)  # both only fill chip series
    elif b.context.single_scan:  # `once`: hccs-bw blocks its sampling time per chip, one chip after another
        options = replace(options, details=tuple(kind for kind in options.details if kind != "hccs-bw"))
    if b.context.single_scan:  # `once` reads once: a chip `info -m` did not name takes the fallback at once
        options = replace(options, device_wait=0.0)
    if b.context.sysfs is not None and options.sysfs == DEFAULT_SYSFS:  # simulated: its model's PCI functions
        options = replace(options, sysfs=b.context.sysfs)
    runner = CommandRunner(
        timeout=options.timeout,
        max_concurrency=options.max_concurrency,
        max_output_bytes=options.max_output_bytes,
        nice=options.nice,
        reserve_urgent=True,  # the overview (utilization) never waits behind the per-chip queries
    )
    source = NpuSmiSource(options, runner, b.health, command=b.command("npusmi", options.path), max_age=b.max_age)
    if not b.wanted:  # no task; its (empty) part still stands for the chips
        return Derived(DEVICES.name, lambda earlier: source.part(), None)
    return Sampled(DEVICES.name, source)


def describe(b: Build[NpuSmiOptions], source: Source | None) -> str:
    if b.simulated is not None:
        return f"npu-smi: the built-in simulator ({b.simulated.model}, scenario {b.simulated.scenario})"
    return "npu-smi: " + " ".join(b.command("npusmi", b.options.path))


def tools(b: Build[NpuSmiOptions]) -> tuple[Tool, ...]:
    """npu-smi, unless a simulator scenario is asked for by name."""
    if not b.wanted or b.context.simulate not in (None, "auto"):
        return ()
    hint = "--simulate auto would serve the simulator" if b.context.simulate == "auto" else ""
    return (Tool("npu_smi.path", b.options.path, hint),)


REGISTRATION = Registration(
    DEVICES,
    build,
    (Collect("devices", ChipsCollector), Collect("processes", ProcessesCollector)),
    NPU_SMI_OPTIONS,
    (
        Switch("devices", "per-chip metrics from npu-smi: identity, health, utilization, memory, power, temperature, ECC"),
        Switch("processes", "per-process device memory from the npu-smi process table"),
    ),
    describe,
    tools,
    notes=(ECC_NOTE, ENERGY_NOTE, FAULT_NOTE, table_note()),
)
