"""`simulator.*`: the built-in simulator standing in for npu-smi and hccn_tool.

The simulator answers their command lines with their own text, so a simulated node runs
through exactly the same subprocess and parser path as real hardware; only the argv prefix
differs.
"""

from __future__ import annotations

import logging
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core.options import choice, option
from exporter.core.runner import OWN_PROCESS_GROUP
from exporter.simulator import resident as resident_simulator
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


def npu_smi_command(options: SimulatorOptions, npu_smi_path: str, nice: int = 5) -> tuple[tuple[str, ...], Simulated | None]:
    """The npu-smi argv prefix and, when simulating, (scenario, model); the resident simulator
    starts here, ``nice`` steps nicer than we are (as npu-smi calls run)."""
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
        prefix = (*simulated_tool("npusmi", nice), "--model", options.model, "--scenario", chip_scenario(scenario), "--")
        return prefix, (scenario, options.model)
    return (npu_smi_path,), None


def hccn_tool_command(simulated: Simulated) -> tuple[str, ...]:
    """The argv prefix that makes the simulator answer like hccn_tool."""
    scenario, model = simulated
    return (*simulated_tool("hccn"), "--model", model, "--scenario", scenario, "--")


def stand_in(module: str) -> tuple[str, ...]:
    """The interpreter running ``module``'s main() isolated and without site: the stand-ins need
    only the standard library and this package, found where this one was loaded from. A
    simulated call is a whole interpreter start, and site (with an editable install's finder)
    was a fifth of it."""
    root = str(Path(__file__).resolve().parents[2])
    code = f"import sys; sys.path.insert(0, {root!r}); from {module} import main; sys.exit(main())"
    return (sys.executable, "-I", "-S", "-c", code)


def simulated_tool(tool: str, nice: int = 5) -> tuple[str, ...]:
    """The argv of a simulated ``tool`` (a key of the resident's TOOLS): the resident simulator's
    bash client when it runs, else the whole stand-in."""
    whole = stand_in(resident_simulator.TOOLS[tool])
    resident = running_resident(nice)
    if resident is None:
        return whole
    return (resident.bash, "-c", resident_simulator.CLIENT, "cann-sim", resident.port, resident.token_file, tool,
            whole[0], whole[-1])


@dataclass(frozen=True)
class Resident:
    process: subprocess.Popen[bytes]
    bash: str
    port: str
    token_file: str


_resident: list[Resident] = []   # the one resident of this process, once started


def running_resident(nice: int = 5) -> Resident | None:
    """The resident simulator, started on first use (and again if it died); None where it
    cannot run (no bash), and calls then start the whole stand-in."""
    if _resident and _resident[0].process.poll() is None:
        return _resident[0]
    _resident.clear()
    started = _start_resident(nice)
    if started is not None:
        _resident.append(started)
    return started


def _start_resident(nice: int) -> Resident | None:
    bash = shutil.which("bash")
    if bash is None:
        log.info("bash not found; every simulated call starts a whole simulator process")
        return None
    # Its own process group (a Ctrl-C to the exporter's terminal is the exporter's to handle)
    # in our session; it exits when its stdin, our pipe, closes.
    process = subprocess.Popen([*stand_in("exporter.simulator.resident"), str(nice)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, **OWN_PROCESS_GROUP)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], resident_simulator.START_TIMEOUT)
    line = process.stdout.readline().decode(errors="replace") if ready else ""
    process.stdout.close()
    port, _, token_file = line.strip().partition(" ")
    if not port.isdigit() or not token_file:
        process.kill()
        process.wait()
        log.warning("the resident simulator did not start; every simulated call starts a whole simulator process",
                    extra={"answer": line[:200]})
        return None
    return Resident(process, bash, port, token_file)
