"""hccn.* settings and how assembly wires the source: auto-enable, the simulator, off."""

from __future__ import annotations

import pytest

from exporter.app.settings import build_settings
from exporter.core.options import ConfigError
from exporter.node.assembly import assemble
from exporter.node.simulate import npu_smi_command, simulated_tool
from exporter.node.sources import hccn_command


def test_defaults():
    settings = build_settings()
    assert settings.hccn.enabled is None  # auto
    assert settings.hccn.path == "/usr/local/Ascend/driver/tools/hccn_tool"
    assert (settings.hccn.timeout, settings.hccn.interval, settings.hccn.slow_interval) == (5, 30, 60)


def test_flags_and_environment():
    settings = build_settings(
        env={"CANN_EXPORTER_HCCN_ENABLED": "true", "CANN_EXPORTER_HCCN_TIMEOUT": "2s"},
        flags={"hccn.path": "/opt/hccn_tool", "hccn.slow_interval": "2m"},
    )
    assert (settings.hccn.enabled, settings.hccn.timeout, settings.hccn.path, settings.hccn.slow_interval) == (
        True,
        2,
        "/opt/hccn_tool",
        120,
    )
    assert build_settings(flags={"hccn.enabled": "false"}).hccn.enabled is False
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"hccn.enabled": "maybe", "hccn.interval": "often"})
    assert len(info.value.problems) == 2


def test_auto_means_the_binary_exists(tmp_path):
    absent = build_settings(flags={"hccn.path": str(tmp_path / "hccn_tool")})
    assert hccn_command(absent.hccn, None) is None
    tool = tmp_path / "hccn_tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert hccn_command(absent.hccn, None) == (str(tool),)
    forced = build_settings(flags={"hccn.enabled": "true", "hccn.path": str(tmp_path / "other")})
    assert hccn_command(forced.hccn, None) == (str(tmp_path / "other"),)  # counted as not_found at run time
    assert hccn_command(build_settings(flags={"hccn.enabled": "false", "hccn.path": str(tool)}).hccn, None) is None


def test_simulation_uses_the_hccn_simulator_and_link_flap_keeps_chips_healthy():
    settings = build_settings(flags={"simulator.scenario": "link-flap", "simulator.model": "a3"})
    command, simulated = npu_smi_command(settings.simulator, settings.npu_smi.path)
    assert simulated == ("link-flap", "a3")
    assert command[command.index("--scenario") + 1] == "healthy"
    assert hccn_command(settings.hccn, simulated) == (
        *simulated_tool("hccn"),
        "--model",
        "a3",
        "--scenario",
        "link-flap",
        "--",
    )
    off = build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"})
    assert hccn_command(off.hccn, ("healthy", "910b3")) is None


def test_assembly_adds_the_tasks_after_npu_smi_and_the_collector():
    exporter = assemble(build_settings(flags={"simulator.scenario": "healthy"}), ingest=False)
    names = [task.name for task in exporter.sampler.tasks]
    assert names[0] == "npu_smi_info" and names.index("hccn") > names.index("npu_smi_info")
    assert names[names.index("hccn") : names.index("hccn") + 2] == ["hccn", "hccn_slow"]
    assert "network" in exporter.sources
    off = assemble(build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"}), ingest=False)
    assert "network" not in off.sources and "hccn" not in [task.name for task in off.sampler.tasks]
