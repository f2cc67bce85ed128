"""hccn_tool's registration: the chips' network ports and optics (`collector.network`), read
for the chips npu-smi lists. `hccn.enabled` auto runs it only where hccn_tool is installed
(inference-only nodes have none: no network metrics, nothing counted as failing)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence

from exporter.core.registration import Build, Collect, Registration, Switch, Tool
from exporter.core.runner import CommandRunner
from exporter.core.source import Sampled, Source
from exporter.hccn.collector import NetworkCollector
from exporter.hccn.options import HCCN_OPTIONS, HccnOptions
from exporter.hccn.part import NETWORK
from exporter.hccn.source import HccnSource
from exporter.npusmi.part import DEVICES, ChipSample

log = logging.getLogger("exporter")

MAX_OUTPUT_BYTES = 1 << 20  # hccn_tool answers are small; a few calls at once (the device serialises them)
MAX_CONCURRENCY = 4


def hccn_command(options: HccnOptions, resolved: tuple[str, ...]) -> tuple[str, ...] | None:
    """The hccn_tool argv prefix (``resolved``: the simulator's stand-in or ``(path,)``), or
    None when it is off: by `hccn.enabled` false, or auto without the binary."""
    if options.enabled is False:
        return None
    if options.enabled is None and resolved == (options.path,) and not shutil.which(options.path):
        log.info("hccn_tool not found; network metrics off", extra={"hccn_tool": options.path})
        return None
    return resolved


def build(b: Build[HccnOptions]) -> Source | None:
    options = b.options
    command = hccn_command(options, b.command("hccn", options.path)) if b.on("network") else None
    if command is None:
        return None
    runner = CommandRunner(timeout=options.timeout, max_concurrency=MAX_CONCURRENCY, max_output_bytes=MAX_OUTPUT_BYTES, nice=options.nice)

    def chips() -> Sequence[ChipSample]:
        devices = b.context.latest().get(DEVICES)
        return devices.chips if devices is not None else ()

    return Sampled(NETWORK.name, HccnSource(options, runner, b.health, chips=chips, command=command, max_age=b.max_age))


def describe(b: Build[HccnOptions], source: Source | None) -> str:
    if source is None:
        return "hccn.enabled is false" if b.options.enabled is False else f"hccn_tool is not installed ({b.options.path})"
    if b.simulated is not None:
        return f"hccn_tool: the built-in simulator ({b.simulated.model}, scenario {b.simulated.scenario})"
    return "hccn_tool: " + " ".join(b.command("hccn", b.options.path))


def tools(b: Build[HccnOptions]) -> tuple[Tool, ...]:
    """hccn_tool when it is asked for by name (auto runs it only where it is installed)."""
    return (Tool("hccn.path", b.options.path),) if b.on("network") and b.options.enabled and b.simulated is None else ()


SWITCH = Switch("network", "RoCE/UB ports and optical modules from hccn_tool, where hccn.enabled allows")
REGISTRATION = Registration(
    NETWORK, build, (Collect(SWITCH.name, NetworkCollector),), HCCN_OPTIONS, (SWITCH,), describe, tools, needs=(DEVICES.name,)
)
