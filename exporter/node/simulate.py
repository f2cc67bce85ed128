"""`simulator.*`: the built-in simulator standing in for npu-smi and hccn_tool.

The simulator answers their command lines with their own text, so a simulated node runs
through exactly the same subprocess and parser path as real hardware; only the argv prefix
differs. Each simulated call is a whole `python -I -S` process of its own.

Nothing here imports `exporter.simulator`: a node that does not simulate never loads it. The
names below are copies of the simulator's (tests/node/test_simulate.py keeps them equal), and
each model's sysfs tree (its Ascend PCI functions) and procfs tree (the processes npu-smi
shows, with their cgroups) are found by path.
"""

from __future__ import annotations

import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core.options import choice, option
from exporter.core.registration import Simulated

log = logging.getLogger("exporter")

CHIP_SCENARIOS: tuple[str, ...] = ("healthy", "underutilized", "sawtooth", "degraded", "idle")
NETWORK_SCENARIOS: tuple[str, ...] = ("link-flap",)  # chips healthy, the network scenario's own
ALL_SCENARIOS: tuple[str, ...] = CHIP_SCENARIOS + NETWORK_SCENARIOS
MODEL_NAMES: tuple[str, ...] = ("910b3", "a3", "310p-duo")
TOOL_MODULES = {"npusmi": "exporter.simulator.npusmi", "hccn": "exporter.simulator.hccn"}


@dataclass(frozen=True)
class NodeSigns:
    """Where a host shows it is an Ascend NPU node even when npu-smi is not on PATH (not
    mounted into the container, or PATH without /usr/local/sbin). Tests point it elsewhere."""

    devices: Path = Path("/dev")  # davinci0..N, davinci_manager
    driver: Path = Path("/usr/local/Ascend/driver")
    npu_smi_places: tuple[str, ...] = ("/usr/local/sbin/npu-smi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/tools/npu-smi")

    def found(self) -> list[str]:
        """The signs present here (a few device nodes at most), empty on a machine without an NPU."""
        signs = sorted(str(path) for path in self.devices.glob("davinci*"))[:3]
        if self.driver.is_dir():
            signs.append(str(self.driver))
        signs.extend(place for place in self.npu_smi_places if Path(place).exists())
        return signs


def optional_scenario(value: Any) -> str | None:
    """A scenario name, `auto` (simulate only on a machine without an NPU), or off."""
    if value is None or value is False or str(value).strip().lower() in ("", "off", "false", "none"):
        return None
    scenario: str = choice("auto", *ALL_SCENARIOS)(value)
    return scenario


@dataclass(frozen=True)
class SimulatorOptions:
    scenario: str | None = option(
        None,
        optional_scenario,
        "use the built-in simulator, in one scenario (alone: healthy): "
        + ", ".join(ALL_SCENARIOS)
        + ", or auto (only when npu-smi is missing and nothing here looks like an NPU node)",
        flag="--simulate",
        metavar="SCENARIO",
        default_text="off",
    )
    model: str = option("910b3", choice(*MODEL_NAMES), "simulated node model", flag="--simulate.model")


def npu_smi_command(
    options: SimulatorOptions, npu_smi_path: str, signs: NodeSigns | None = None, *, say: bool = True
) -> tuple[tuple[str, ...], Simulated | None]:
    """The npu-smi argv prefix and, when simulating, (scenario, model).

    `auto` simulates only where npu-smi is missing *and* the host shows no sign of an NPU: on
    a real node whose npu-smi is not found, the exporter runs the real path (its source fails,
    counted) and says why, rather than serve healthy made-up chips. ``say=False``: no log line
    (check-config describes a node without serving it)."""
    scenario = options.scenario
    if scenario == "auto":
        found = shutil.which(npu_smi_path)
        if found:
            return (found,), None
        seen = (signs or NodeSigns()).found()
        if seen and say:
            log.error(
                "npu-smi not found, and this host looks like an Ascend NPU node: not simulating; "
                "install or mount npu-smi, or set npu_smi.path",
                extra={"npu_smi": npu_smi_path, "signs": ", ".join(seen)},
            )
        if seen:
            return (npu_smi_path,), None
        scenario = "healthy"
    if scenario and say:
        log.warning(
            "SIMULATED: serving the built-in simulator, not real chips",
            extra={"scenario": scenario, "model": options.model, "asked": options.scenario},
        )
    if scenario:
        simulated = Simulated(scenario, options.model)
        return stand_in("npusmi", simulated), simulated
    return (npu_smi_path,), None


def resolve_commands(
    options: SimulatorOptions, npu_smi_path: str, *, say: bool = True
) -> tuple[dict[str, tuple[str, ...]], Simulated | None]:
    """The tools' argv prefixes, resolved once for the node before any source is built: npu-smi
    (found on PATH, or the simulator's stand-in) and, when simulating, hccn_tool's stand-in."""
    npu_smi, simulated = npu_smi_command(options, npu_smi_path, say=say)
    commands = {"npusmi": npu_smi}
    if simulated is not None:
        commands["hccn"] = stand_in("hccn", simulated)
    return commands, simulated


def chip_scenario(scenario: str) -> str:
    """The npu-smi scenario that drives the chips' load under a network scenario."""
    return "healthy" if scenario in NETWORK_SCENARIOS else scenario


def stand_in(tool: str, simulated: Simulated) -> tuple[str, ...]:
    """The argv prefix that makes the simulator answer like ``tool`` (npusmi or hccn)."""
    scenario = chip_scenario(simulated.scenario) if tool == "npusmi" else simulated.scenario
    return (*simulated_tool(tool), "--model", simulated.model, "--scenario", scenario, "--")


def hccn_tool_command(simulated: Simulated) -> tuple[str, ...]:
    """The argv prefix that makes the simulator answer like hccn_tool."""
    return stand_in("hccn", simulated)


def sysfs_tree(model: str) -> str:
    """The sysfs root holding ``model``'s Ascend PCI functions, as its healthy node shows them
    (the simulator's package data, simulator/pci.py): what `npu_smi.sysfs` reads when simulating."""
    return str(Path(__file__).resolve().parents[1] / "simulator" / "sysfs" / model)


def procfs_tree(model: str) -> str:
    """The procfs root holding the processes ``model``'s npu-smi shows on its busy chips, each
    with the cgroup of an owner (the simulator's package data, simulator/procfs.py): what
    `owners.procfs` reads when simulating."""
    return str(Path(__file__).resolve().parents[1] / "simulator" / "procfs" / model)


def passwd_file() -> str:
    """The users of the simulated Slurm jobs (simulator/procfs.py): `owners.passwd` when simulating."""
    return str(Path(__file__).resolve().parents[1] / "simulator" / "passwd")


def simulated_tool(tool: str) -> tuple[str, ...]:
    """The interpreter running the ``tool`` stand-in's main() (a key of TOOL_MODULES) isolated
    and without site: the stand-ins need only the standard library and this package, found
    where this one was loaded from. A simulated call is a whole interpreter start, and site
    (with an editable install's finder) was a fifth of it."""
    root = str(Path(__file__).resolve().parents[2])
    module = TOOL_MODULES[tool]
    code = f"import sys; sys.path.insert(0, {root!r}); from {module} import main; sys.exit(main())"
    return (sys.executable, "-I", "-S", "-c", code)
