"""hccn.* settings and how assembly wires the source: auto-enable, the simulator, off."""

from __future__ import annotations

import sys

import pytest

from exporter.assembly import assemble, resolve_hccn, resolve_npu_smi
from exporter.config import ConfigError, build_settings


def test_defaults():
    settings = build_settings()
    assert settings.hccn_enabled is None  # auto
    assert settings.hccn_path == "/usr/local/Ascend/driver/tools/hccn_tool"
    assert (settings.hccn_timeout, settings.hccn_interval, settings.hccn_slow_interval) == (5, 30, 60)


def test_flags_and_environment():
    settings = build_settings(
        env={"CANN_EXPORTER_HCCN_ENABLED": "true", "CANN_EXPORTER_HCCN_TIMEOUT": "2s"},
        flags={"hccn.path": "/opt/hccn_tool", "hccn.slow_interval": "2m"},
    )
    assert (settings.hccn_enabled, settings.hccn_timeout, settings.hccn_path, settings.hccn_slow_interval) == (
        True, 2, "/opt/hccn_tool", 120,
    )
    assert build_settings(flags={"hccn.enabled": "false"}).hccn_enabled is False
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"hccn.enabled": "maybe", "hccn.interval": "often"})
    assert len(info.value.problems) == 2


def test_auto_means_the_binary_exists(tmp_path):
    absent = build_settings(flags={"hccn.path": str(tmp_path / "hccn_tool")})
    assert resolve_hccn(absent, None) is None
    tool = tmp_path / "hccn_tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert resolve_hccn(absent, None) == (str(tool),)
    forced = build_settings(flags={"hccn.enabled": "true", "hccn.path": str(tmp_path / "other")})
    assert resolve_hccn(forced, None) == (str(tmp_path / "other"),)  # counted as not_found at run time
    assert resolve_hccn(build_settings(flags={"hccn.enabled": "false", "hccn.path": str(tool)}), None) is None


def test_simulation_uses_the_hccn_simulator_and_link_flap_keeps_chips_healthy():
    settings = build_settings(flags={"simulator.scenario": "link-flap", "simulator.model": "a3"})
    command, simulated = resolve_npu_smi(settings)
    assert simulated == ("link-flap", "a3")
    assert command[command.index("--scenario") + 1] == "healthy"
    assert resolve_hccn(settings, simulated) == (
        sys.executable, "-m", "exporter.simulator.hccn", "--model", "a3", "--scenario", "link-flap", "--",
    )
    off = build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"})
    assert resolve_hccn(off, ("healthy", "910b3")) is None


def test_assembly_adds_the_tasks_after_npu_smi_and_the_collector():
    exporter = assemble(build_settings(flags={"simulator.scenario": "healthy"}), ingest=False)
    names = [task.name for task in exporter.sampler.tasks]
    assert names[0] == "npu_smi_info" and names[-2:] == ["hccn", "hccn_slow"]
    assert exporter.hccn is not None
    off = assemble(build_settings(flags={"simulator.scenario": "healthy", "hccn.enabled": "false"}), ingest=False)
    assert off.hccn is None and "hccn" not in [task.name for task in off.sampler.tasks]
