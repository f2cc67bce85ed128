"""hccn.* settings and how assembly wires the source: auto-enable, the simulator, off."""

from __future__ import annotations

import pytest

from exporter.app.settings import build_settings
from exporter.core.options import ConfigError
from exporter.hccn.options import HCCN_OPTIONS
from exporter.hccn.registration import hccn_command
from exporter.node.assembly import assemble
from exporter.node.simulate import resolve_commands, simulated_tool
from exporter.npusmi.options import NPU_SMI_OPTIONS


def test_defaults():
    settings = build_settings()
    assert settings[HCCN_OPTIONS].enabled is None  # auto
    assert settings[HCCN_OPTIONS].path == "/usr/local/Ascend/driver/tools/hccn_tool"
    assert (settings[HCCN_OPTIONS].timeout, settings[HCCN_OPTIONS].interval, settings[HCCN_OPTIONS].slow_interval) == (5, 30, 60)


def test_flags_and_environment():
    settings = build_settings(
        env={"CANN_EXPORTER_HCCN_ENABLED": "true", "CANN_EXPORTER_HCCN_TIMEOUT": "2s"},
        flags={"hccn.path": "/opt/hccn_tool", "hccn.slow_interval": "2m"},
    )
    assert (
        settings[HCCN_OPTIONS].enabled,
        settings[HCCN_OPTIONS].timeout,
        settings[HCCN_OPTIONS].path,
        settings[HCCN_OPTIONS].slow_interval,
    ) == (
        True,
        2,
        "/opt/hccn_tool",
        120,
    )
    assert build_settings(flags={"hccn.enabled": "false"})[HCCN_OPTIONS].enabled is False
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"hccn.enabled": "maybe", "hccn.interval": "often"})
    assert len(info.value.problems) == 2


def test_auto_means_the_binary_exists(tmp_path):
    absent = build_settings(flags={"hccn.path": str(tmp_path / "hccn_tool")})
    real = (str(tmp_path / "hccn_tool"),)
    assert hccn_command(absent[HCCN_OPTIONS], real) is None
    tool = tmp_path / "hccn_tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert hccn_command(absent[HCCN_OPTIONS], real) == (str(tool),)
    forced = build_settings(flags={"hccn.enabled": "true", "hccn.path": str(tmp_path / "other")})
    other = (str(tmp_path / "other"),)
    assert hccn_command(forced[HCCN_OPTIONS], other) == other  # counted as not_found at run time
    assert hccn_command(build_settings(flags={"hccn.enabled": "false", "hccn.path": str(tool)})[HCCN_OPTIONS], real) is None


def test_simulation_uses_the_hccn_simulator_and_link_flap_keeps_chips_healthy():
    settings = build_settings(flags={"simulator.scenario": "link-flap", "simulator.model": "a3"})
    commands, simulated = resolve_commands(settings.simulator, settings[NPU_SMI_OPTIONS].path)
    assert simulated == ("link-flap", "a3")
    command = commands["npusmi"]
    assert command[command.index("--scenario") + 1] == "healthy"
    assert hccn_command(settings[HCCN_OPTIONS], commands["hccn"]) == (
        *simulated_tool("hccn"),
        "--model",
        "a3",
        "--scenario",
        "link-flap",
        "--",
    )
    off = build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"})
    commands, _ = resolve_commands(off.simulator, off[NPU_SMI_OPTIONS].path)
    assert hccn_command(off[HCCN_OPTIONS], commands["hccn"]) is None


def test_assembly_adds_the_tasks_after_npu_smi_and_the_collector():
    exporter = assemble(build_settings(flags={"simulator.scenario": "healthy"}), ingest=False)
    names = [task.name for task in exporter.sampler.tasks]
    assert names[0] == "npu_smi_info" and names.index("hccn") > names.index("npu_smi_info")
    assert names[names.index("hccn") : names.index("hccn") + 2] == ["hccn", "hccn_slow"]
    assert "network" in exporter.sources
    off = assemble(build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"}), ingest=False)
    assert "network" not in off.sources and "hccn" not in [task.name for task in off.sampler.tasks]
