"""End to end: `cann-exporter once` with hccn_tool (the simulator, a replaying stand-in, or none)."""

from __future__ import annotations

import subprocess
import sys

from exporter.cli import main
from exporter.simulator.network import FLAP_DOWN_S, FLAP_PERIOD_S
from exporter.simulator.scenarios import ECC_EPOCH
from tests.support.exposition import samples, value, values
from tests.support.hccn import write_replay_hccn

QUIET = ["--log.level", "error"]


def per_chip(found, name) -> dict[str, float]:
    return values(found, name, "npu")


def test_once_simulate_shows_the_network_of_every_chip():
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "once", "--simulate", *QUIET],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    found = samples(proc.stdout)
    chips = {str(n) for n in range(8)}
    assert per_chip(found, "npu_up") == dict.fromkeys(chips, 1.0)
    assert per_chip(found, "npu_network_link_up") == dict.fromkeys(chips, 1.0)
    assert per_chip(found, "npu_network_speed_bytes") == dict.fromkeys(chips, 25e9)  # 200 Gb/s
    assert set(per_chip(found, "npu_network_receive_bytes_per_second")) == chips
    assert set(per_chip(found, "npu_optical_temperature_celsius")) == chips
    assert value(found, "npu_network_health", npu="5", state="Success") == 1
    assert value(found, "npu_optical_rx_power_watts", npu="7", lane="3") > 0
    assert value(found, "npu_network_packets_total", npu="2", direction="rx", kind="pfc") > 0
    assert value(found, "npu_network_link_up", npu="0", device="0", chip="0", port="") == 1
    for source in ("hccn_link", "hccn_stat", "hccn_optical", "hccn_bandwidth"):
        assert value(found, "cann_exporter_source_success", source=source) == 1


def test_once_simulate_link_flap(capsys, monkeypatch):
    down = ECC_EPOCH + 50 * FLAP_PERIOD_S + (FLAP_PERIOD_S - FLAP_DOWN_S) + 5
    monkeypatch.setenv("CANN_SIM_TIME", str(down))
    assert main(["once", "--simulate", "link-flap", "--npu-smi.details=", "--no-npu-smi.board", *QUIET]) == 0
    found = samples(capsys.readouterr().out)
    assert value(found, "cann_exporter_simulated", scenario="link-flap", model="910b3") == 1
    assert value(found, "npu_network_link_up", npu="0") == 0
    assert value(found, "npu_network_link_up", npu="1") == 1
    assert value(found, "npu_network_speed_bytes", npu="0") is None
    assert value(found, "npu_network_link_down_transitions_total", npu="0") == 51
    assert value(found, "npu_network_link_up_transitions_total", npu="0") == 51
    assert value(found, "npu_network_health", npu="0", state="Success") == 0
    assert value(found, "npu_optical_rx_power_watts", npu="0", lane="0") < 0.1445e-3  # below the module's low threshold
    assert value(found, "npu_up", npu="0") == 1  # the chip itself is fine


def test_no_hccn_tool_no_network_metrics_and_nothing_counted(replay_npu_smi, tmp_path, capsys):
    npu_smi = replay_npu_smi({"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    status = main(["once", "--npu-smi", str(npu_smi), "--hccn-tool", str(tmp_path / "absent"), *QUIET])
    text = capsys.readouterr().out
    assert status == 0
    assert "npu_network_" not in text and "npu_optical_" not in text and "hccn" not in text
    assert value(samples(text), "npu_devices") == 8


def test_enabled_but_missing_is_counted_once_and_chips_are_unaffected(replay_npu_smi, tmp_path, capsys):
    npu_smi = replay_npu_smi({"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    status = main(
        ["once", "--npu-smi", str(npu_smi), "--hccn.enabled", "--hccn-tool", str(tmp_path / "absent"), "--npu-smi.details=", *QUIET]
    )
    found = samples(capsys.readouterr().out)
    assert status == 0
    errors = {
        (dict(ls)["source"], dict(ls)["reason"]): v
        for (n, ls), v in found.items()
        if n == "cann_exporter_source_errors_total" and dict(ls)["source"].startswith("hccn")
    }
    assert errors == {("hccn_link", "not_found"): 1}
    assert not [n for (n, _) in found if n.startswith(("npu_network_", "npu_optical_"))]
    assert value(found, "npu_hbm_total_bytes", npu="0") == 65536 * 1024 * 1024


def test_one_chip_answers_the_others_fail_by_reason(replay_npu_smi, tmp_path, capsys):
    npu_smi = replay_npu_smi({"info": "info__910B3__25.5.1__1", "info -m": "info-m__910B3__25.5.1__1"})
    hccn = write_replay_hccn(
        tmp_path,
        {
            "-i 0 -link -g": "link__unknown__1",
            "-i 0 -link_stat -g": "link_stat__unknown__3",
            "-i 0 -net_health -g": "net_health__unknown__3",
            "-i 0 -speed -g": "text:Speed: 200000 Mb/s",
            "-i 0 -stat -g": "stat__unknown__1__mangled",
            "-i 0 -optical -g": "optical__910A__1__mangled",
            "-i 0 -bandwidth -g": "bandwidth__950-A5__1",
            "-i 0 -ip -g": "ip__910B1__1",
            "-i 1 -*": ("text:hccn_tool is busy, please try again.", 11),
        },
    )
    status = main(["once", "--npu-smi", str(npu_smi), "--hccn-tool", str(hccn), "--npu-smi.details=", *QUIET])
    found = samples(capsys.readouterr().out)
    assert status == 0
    assert per_chip(found, "npu_network_link_up") == {"0": 1.0}
    assert value(found, "npu_network_info", npu="0", address="29.1.112.213") == 1
    assert value(found, "npu_optical_present", npu="0") == 0  # the sample says "not present"
    assert value(found, "npu_optical_rx_power_watts", npu="0") is None
    assert value(found, "cann_exporter_source_errors_total", source="hccn_link", reason="busy") == 1
    assert value(found, "cann_exporter_source_errors_total", source="hccn_link", reason="bad_option") == 6
    assert set(per_chip(found, "npu_up")) == {str(n) for n in range(8)}
