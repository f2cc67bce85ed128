"""Settings: YAML + environment + flags, every bad entry named, exit status 2."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from exporter.app.settings import OPTIONS, SWITCH_OPTIONS, build_settings, load_yaml
from exporter.cli import main
from exporter.core.options import ConfigError, parse_duration
from exporter.npusmi.options import NPU_SMI_OPTIONS
from tests.support.paths import ROOT

EXAMPLE = ROOT / "config.example.yaml"


def test_defaults():
    settings = build_settings()
    assert (settings.listen_host, settings.listen_port) == ("", 9435)
    assert settings[NPU_SMI_OPTIONS].interval == 10 and settings[NPU_SMI_OPTIONS].detail_interval == 60
    assert settings[NPU_SMI_OPTIONS].details == (
        "usages",
        "common",
        "ecc",
        "current-fault-event",
        "health",
        "volt",
        "pcie-err",
        "sensors",
        "sio-info",
        "hccs",
        "hccs-bw",
        "spod-info",
    )
    assert settings.simulator.scenario is None
    assert all(settings.collector.on(name) for name in ("devices", "processes", "self"))


def test_precedence_flag_over_env_over_file():
    file_values = load_yaml("npu_smi:\n  timeout: 3s\n  interval: 20s\nlog:\n  format: json\n")
    env = {"CANN_EXPORTER_NPU_SMI_TIMEOUT": "4s", "CANN_EXPORTER_LOG_LEVEL": "debug"}
    settings = build_settings(file_values, env, {"npu_smi.timeout": "5s"})
    assert settings[NPU_SMI_OPTIONS].timeout == 5  # flag
    assert settings.log.level == "debug"  # env
    assert settings[NPU_SMI_OPTIONS].interval == 20  # file
    assert settings.log.format == "json"  # file


def test_every_bad_entry_is_named_at_once():
    file_values = load_yaml("npu_smi:\n  timout: 3s\n  interval: soon\nlisten: nowhere\ncollector:\n  devices: maybe\n")
    with pytest.raises(ConfigError) as info:
        build_settings(file_values, origin="x.yaml")
    text = "\n".join(info.value.problems)
    assert "x.yaml: unknown key 'npu_smi.timout'; did you mean 'npu_smi.timeout'?" in info.value.problems
    assert "x.yaml: npu_smi.interval" in text and "soon" in text
    assert "x.yaml: listen" in text
    assert "x.yaml: collector.devices" in text
    assert len(info.value.problems) == 4


def test_env_values_are_validated_and_named():
    with pytest.raises(ConfigError) as info:
        build_settings(env={"CANN_EXPORTER_NPU_SMI_MAX_CONCURRENCY": "0"})
    assert info.value.problems[0].startswith("CANN_EXPORTER_NPU_SMI_MAX_CONCURRENCY:")


def test_unknown_environment_variables_are_named_with_a_guess():
    with pytest.raises(ConfigError) as info:
        build_settings(
            env={"CANN_EXPORTER_NPU_SMI_INTERVL": "5s", "CANN_EXPORTER_BOGUS": "1", "CANN_EXPORTER_HOOKS": "off", "CANN_EXPORTERS": "x"}
        )
    assert info.value.problems == [
        "CANN_EXPORTER_BOGUS: unknown environment variable",
        "CANN_EXPORTER_NPU_SMI_INTERVL: unknown environment variable; did you mean 'CANN_EXPORTER_NPU_SMI_INTERVAL'?",
    ]


def test_cross_check_max_age_must_exceed_the_detail_interval():
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"max_age": "30s"})
    assert "max_age" in info.value.problems[0]


@pytest.mark.parametrize("text,seconds", [("10s", 10), ("1.5m", 90), ("500ms", 0.5), ("2h", 7200), (7, 7), ("1h30m", 5400), ("30", 30)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-1s", "0", "ten", "5x", True, "1e999", 10**400])
def test_bad_durations(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_yaml_that_is_not_a_mapping():
    with pytest.raises(ConfigError):
        load_yaml("- a\n- b\n")
    with pytest.raises(ConfigError):
        load_yaml("a: [unclosed\n")


def test_every_option_has_a_flag_env_and_help():
    flags = [o.flag_name for o in OPTIONS]
    envs = [o.env_name for o in OPTIONS]
    assert len(set(flags)) == len(flags) and len(set(envs)) == len(envs)
    assert all(o.help for o in OPTIONS)
    assert all(e.startswith("CANN_EXPORTER_") for e in envs)


def test_the_example_config_is_valid_and_documents_every_option():
    text = EXAMPLE.read_text()
    build_settings(load_yaml(text, str(EXAMPLE)))
    for option in OPTIONS:
        assert option.key.split(".")[-1] in text, f"{option.key} is not documented in config.example.yaml"


# An executable file standing where npu-smi would: check-config only asks that it can be run.
STAND_IN = shutil.which("true")


def test_check_config_names_a_missing_tool_with_exit_3(tmp_path, capsys):
    """A valid configuration whose npu-smi (or enabled hccn_tool) cannot be run here: exit 3, not 0."""
    config, plain = tmp_path / "c.yaml", tmp_path / "hccn_tool"
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    config.write_text(f"npu_smi:\n  path: /nonexistent/npu-smi\nhccn:\n  enabled: true\n  path: {plain}\n")
    assert main(["check-config", str(config)]) == 3
    err = capsys.readouterr().err
    assert "npu_smi.path: /nonexistent/npu-smi does not exist" in err
    assert f"hccn.path: {plain} is not an executable file" in err
    config.write_text("npu_smi:\n  path: no-such-npu-smi\nsimulator:\n  scenario: auto\n")
    assert main(["check-config", str(config)]) == 3
    assert "no-such-npu-smi is not on PATH" in capsys.readouterr().err
    config.write_text("simulator:\n  scenario: healthy\n")  # simulating by name runs no npu-smi
    assert main(["check-config", str(config)]) == 0


def test_check_config_command(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    good = tmp_path / "good.yaml"
    good.write_text(f"npu_smi:\n  timeout: 5s\n  path: {STAND_IN}\ncollector:\n  network: false\nprofiles:\n  dirs: [/data/profiles]\n")
    assert main(["check-config", str(good)]) == 0
    listed = capsys.readouterr().out.splitlines()
    # Every collector, on or off, and what else decides whether its source runs.
    assert [line.split(":")[0] for line in listed[1:]] == [option.key for option in SWITCH_OPTIONS]
    assert "collector.network: off" in listed
    assert "collector.profiles: on, profile directories: /data/profiles; POST /api/v1/profiles" in listed
    assert f"collector.devices: on, npu-smi: {STAND_IN}" in listed
    assert "collector.pods: off, not in Kubernetes (podresources.enabled auto)" in listed
    bad = tmp_path / "bad.yaml"
    bad.write_text("npu_smi:\n  timeout: never\nbogus: 1\n")
    assert main(["check-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "npu_smi.timeout" in err and "bogus" in err
    assert main(["check-config", str(tmp_path / "missing.yaml")]) == 2


def test_serve_exits_2_naming_the_bad_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("npu_smi:\n  intervall: 5s\n")
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "npu_smi.intervall" in proc.stderr


def test_bad_flag_value_exits_2(capsys):
    assert main(["serve", "--npu-smi.timeout", "forever"]) == 2
    assert "--npu-smi.timeout" in capsys.readouterr().err
