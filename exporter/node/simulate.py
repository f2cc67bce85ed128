"""`simulator.*`: the built-in simulator standing in for npu-smi and hccn_tool.

The simulator answers their command lines with their own text, so a simulated node runs
through exactly the same subprocess and parser path as real hardware; only the argv prefix
differs.
"""

from __future__ import annotations

import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core.options import choice, option
from exporter.simulator.models import MODEL_NAMES
from exporter.simulator.network import ALL_SCENARIOS, chip_scenario

log = logging.getLogger("exporter")

Simulated = tuple[str, str]   # (scenario, model)


def optional_scenario(value: Any) -> str | None:
    """A scenario name, `auto` (simulate only when npu-smi is missing), or off."""
    if value is None or value is False or str(value).strip().lower() in ("", "off", "false", "none"):
        return None
    return choice("auto", *ALL_SCENARIOS)(value)


@dataclass(frozen=True)
class SimulatorOptions:
    scenario: str | None = option(
        None, optional_scenario,
        "use the built-in simulator, in one scenario (alone: healthy): " + ", ".join(ALL_SCENARIOS)
        + ", or auto (only when npu-smi is missing)",
        flag="--simulate", metavar="SCENARIO", default_text="off")
    model: str = option("910b3", choice(*MODEL_NAMES), "simulated node model", flag="--simulate.model")


def npu_smi_command(options: SimulatorOptions, npu_smi_path: str) -> tuple[tuple[str, ...], Simulated | None]:
    """The npu-smi argv prefix and, when simulating, (scenario, model)."""
    scenario = options.scenario
    if scenario == "auto":
        found = shutil.which(npu_smi_path)
        if found:
            return (found,), None
        log.warning(
            "npu-smi not found; serving the built-in simulator (scenario healthy)",
            extra={"npu_smi": npu_smi_path, "model": options.model},
        )
        scenario = "healthy"
    if scenario:
        prefix = (*stand_in("exporter.simulator.npusmi"), "--model", options.model, "--scenario", chip_scenario(scenario), "--")
        return prefix, (scenario, options.model)
    return (npu_smi_path,), None


def hccn_tool_command(simulated: Simulated) -> tuple[str, ...]:
    """The argv prefix that makes the simulator answer like hccn_tool."""
    scenario, model = simulated
    return (*stand_in("exporter.simulator.hccn"), "--model", model, "--scenario", scenario, "--")


def stand_in(module: str) -> tuple[str, ...]:
    """The interpreter running ``module``'s main() isolated and without site: the stand-ins need
    only the standard library and this package, found where this one was loaded from. A
    simulated call is a whole interpreter start, and site (with an editable install's finder)
    was a fifth of it."""
    root = str(Path(__file__).resolve().parents[2])
    code = f"import sys; sys.path.insert(0, {root!r}); from {module} import main; sys.exit(main())"
    return (sys.executable, "-I", "-S", "-c", code)
