"""node/simulate.py: the simulator is a subprocess, never a module of the exporter, and `auto`
never simulates on a host that looks like an NPU node."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.node import simulate
from exporter.node.simulate import NodeSigns, SimulatorOptions, npu_smi_command
from exporter.simulator.models import MODEL_NAMES
from exporter.simulator.network import ALL_SCENARIOS, NETWORK_SCENARIOS
from exporter.simulator.scenarios import SCENARIOS

REPO = Path(__file__).resolve().parents[2]

# What serve does up to the listener: its parser, its settings, its node (sources, sampler).
BUILD_LIKE_SERVE = """
import json, os, sys
from exporter.cli import build_parser, parse
from exporter.commands import serve
from exporter.commands.flags import load_settings
from exporter.app.sources import web_sources
from exporter.node.assembly import assemble
settings = load_settings(parse(build_parser(), ["serve", *sys.argv[1:]]), os.environ)
from exporter.npusmi.source import NpuSmiSource
node = assemble(settings, more=web_sources(None))
npu_smi = node.source(NpuSmiSource)
print(json.dumps({"modules": sorted(sys.modules), "simulated": node.simulated, "npu_smi": list(npu_smi.command)}))
"""


def test_the_name_lists_are_the_simulators():
    assert simulate.CHIP_SCENARIOS == SCENARIOS
    assert simulate.NETWORK_SCENARIOS == NETWORK_SCENARIOS
    assert simulate.ALL_SCENARIOS == ALL_SCENARIOS
    assert simulate.MODEL_NAMES == MODEL_NAMES
    for module in simulate.TOOL_MODULES.values():
        assert callable(importlib.import_module(module).main)


def build_like_serve(*flags: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANN_EXPORTER_", "CANN_SIM_"))}
    env.update(PYTHONPATH=str(REPO), PATH=str(tmp_path))  # no npu-smi or hccn_tool on PATH
    proc = subprocess.run(
        [sys.executable, "-c", BUILD_LIKE_SERVE, "--listen", "127.0.0.1:0", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("flags", [(), ("--simulate",), ("--simulate", "auto"), ("--simulate", "link-flap")])
def test_serve_never_loads_the_simulator_package(tmp_path, flags):
    built = build_like_serve(*flags, tmp_path=tmp_path)
    assert "exporter.node.assembly" in built["modules"] and "exporter.npusmi.source" in built["modules"]
    assert [m for m in built["modules"] if m.startswith("exporter.simulator")] == []
    if flags:  # simulated calls run the stand-in as a process of its own
        assert built["simulated"] is not None and "exporter.simulator.npusmi" in " ".join(built["npu_smi"])
    else:
        assert built == {**built, "simulated": None, "npu_smi": ["npu-smi"]}


def npu_node(tmp_path: Path, *, device: bool = False, driver: bool = False, npu_smi: bool = False) -> NodeSigns:
    (tmp_path / "dev").mkdir()
    if device:
        (tmp_path / "dev" / "davinci0").touch()
    if driver:
        (tmp_path / "driver").mkdir()
    if npu_smi:
        (tmp_path / "npu-smi").touch()
    return NodeSigns(devices=tmp_path / "dev", driver=tmp_path / "driver", npu_smi_places=(str(tmp_path / "npu-smi"),))


@pytest.mark.parametrize("sign", ["device", "driver", "npu_smi"])
def test_auto_does_not_simulate_on_a_host_that_looks_like_an_npu_node(tmp_path, caplog, sign):
    signs = npu_node(tmp_path, **{sign: True})
    with caplog.at_level(logging.INFO, logger="exporter"):
        command, simulated = npu_smi_command(SimulatorOptions("auto"), str(tmp_path / "missing-npu-smi"), signs)
    assert (command, simulated) == ((str(tmp_path / "missing-npu-smi"),), None)  # the real path: its source fails, counted
    [record] = caplog.records
    assert record.levelno == logging.ERROR and "not simulating" in record.getMessage()
    assert str(tmp_path) in record.signs


def test_auto_simulates_only_without_npu_smi_or_any_sign_and_says_so(tmp_path, caplog):
    signs = npu_node(tmp_path)
    with caplog.at_level(logging.INFO, logger="exporter"):
        command, simulated = npu_smi_command(SimulatorOptions("auto", "a3"), str(tmp_path / "missing-npu-smi"), signs)
    assert simulated == ("healthy", "a3") and command[-5:] == ("--model", "a3", "--scenario", "healthy", "--")
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.getMessage().startswith("SIMULATED")
    tool = tmp_path / "npu-smi-on-path"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert npu_smi_command(SimulatorOptions("auto"), str(tool), signs) == ((str(tool),), None)


def test_asked_for_simulation_is_loud_and_off_is_silent(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="exporter"):
        assert npu_smi_command(SimulatorOptions(None), "npu-smi") == (("npu-smi",), None)
        assert caplog.records == []
        _, simulated = npu_smi_command(SimulatorOptions("degraded"), "npu-smi")
    assert simulated == ("degraded", "910b3")
    assert [r.getMessage()[:9] for r in caplog.records] == ["SIMULATED"]
