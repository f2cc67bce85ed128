"""HccnSource through real subprocesses: a shell stand-in printing the real samples (and
hccn_tool's error paths), and the simulator. Every call goes through CommandRunner."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from exporter.core.health import HealthRegistry
from exporter.core.runner import CommandRunner
from exporter.hccn.options import HccnOptions
from exporter.hccn.part import NetworkCounter, classify_counters
from exporter.hccn.source import HccnSource, age_limit, tool_id
from exporter.npusmi.part import ChipSample
from exporter.simulator.models import MODELS
from exporter.simulator.network import LINK_FLAP_LOGIC_ID, simulate_network
from exporter.simulator.scenarios import ECC_EPOCH
from tests.support.hccn import calls, write_replay_hccn

CHIP0 = ChipSample(npu=0, chip=0, device=0, up=True, model="910B3")

SAMPLE_REPLIES = {
    "-i 0 -link -g": "link__unknown__1",
    "-i 0 -link_stat -g": "link_stat__unknown__3",
    "-i 0 -speed -g": "text:Speed: 100000 Mb/s",
    "-i 0 -net_health -g": "net_health__unknown__2",
    "-i 0 -stat -g": "stat__unknown__1__mangled",
    "-i 0 -optical -g": ("text:Optical module is not present.", 20),
    "-i 0 -bandwidth -g": "bandwidth__950-A5__1",
    "-i 0 -ip -g": ("error-ip-not-preset__unknown__1", 13, "err"),
}


def make_source(command, chips=(CHIP0,), timeout: float = 5.0) -> tuple[HccnSource, HealthRegistry]:
    health = HealthRegistry()
    runner = CommandRunner(timeout=timeout, max_concurrency=4, max_output_bytes=1 << 20)
    options = HccnOptions(timeout=timeout, interval=30, slow_interval=60)
    return HccnSource(options, runner, health, chips=lambda: chips, command=tuple(command), max_age=180), health


async def run_all(source: HccnSource) -> None:
    await source.refresh_fast()
    await source.refresh_slow()


def errors(health: HealthRegistry) -> dict[tuple[str, str], int]:
    return {(s.name, reason): n for s in health.statuses() for reason, n in s.errors.items()}


def success(health: HealthRegistry) -> dict[str, bool]:
    return {s.name: s.success for s in health.statuses()}


async def test_real_samples_become_a_port_sample(tmp_path):
    script = write_replay_hccn(tmp_path, SAMPLE_REPLIES)
    source, health = make_source([str(script)])
    await run_all(source)
    (port,) = source.part().ports
    assert (port.npu, port.chip, port.device, port.port) == (0, 0, 0, "")
    assert port.link_up is True
    assert (port.link_up_transitions, port.link_down_transitions) == (2, 1)
    assert port.speed_bytes_per_second == 12.5e9  # 100 Gb/s
    assert port.health == "Fault"
    assert port.receive_bytes_per_second == pytest.approx(266.84e6)
    assert port.transmit_bytes_per_second == 0.0
    assert NetworkCounter("tx", "nic", 122404) in port.packets
    assert NetworkCounter("rx", "nic", 482237805) in port.bytes
    assert NetworkCounter("", "qp_status", 0) in port.errors
    # An absent module and an unset IP are readings, not failures.
    assert port.optical_present is False and port.optical_lanes == ()
    assert port.address is None
    assert all(success(health).values()) and errors(health) == {}
    assert set(success(health)) == {f"hccn_{c}" for c in ("link", "link_stat", "speed", "net_health", "stat", "bandwidth", "optical", "ip")}


@pytest.mark.parametrize(
    "reply,reason",
    [
        (("text:hccn_tool is busy, please try again.", 11), "busy"),
        (("text:permission denied: pls check this cmd run permission.", 12, "err"), "permission_denied"),
        (("text:\x7f\x01 *** %%% not hccn_tool", 0), "garbled"),
        (("text:Get device health status failed!", 3, "err"), "device_unhealthy"),
        ((None, 9), "exit_status"),
    ],
)
async def test_a_failing_call_is_counted_by_reason_and_hides_nothing_else(tmp_path, reply, reason):
    script = write_replay_hccn(tmp_path, {**SAMPLE_REPLIES, "-i 0 -link -g": reply})
    source, health = make_source([str(script)])
    await source.refresh_fast()
    assert errors(health) == {("hccn_link", reason): 1}
    assert success(health)["hccn_link"] is False
    if reason == "device_unhealthy":  # the device is not answering: the rest of its calls are skipped
        assert calls(tmp_path) == ["-i 0 -link -g"]
        assert source.part().ports == ()
        return
    (port,) = source.part().ports
    assert port.link_up is None
    assert port.health == "Fault" and port.link_up_transitions == 2
    assert success(health)["hccn_stat"] is True


async def test_unsupported_is_counted_once_then_not_asked_again(tmp_path):
    reply = ("text:The command is not supported on this product.", 13)
    script = write_replay_hccn(tmp_path, {**SAMPLE_REPLIES, "-i 0 -optical -g": reply})
    source, health = make_source([str(script)])
    await source.refresh_slow()
    await source.refresh_slow()
    assert errors(health) == {("hccn_optical", "not_supported"): 1}
    assert success(health)["hccn_optical"] is True  # nothing left to fail
    assert calls(tmp_path).count("-i 0 -optical -g") == 1
    assert calls(tmp_path).count("-i 0 -ip -g") == 2


async def test_a_hanging_call_is_killed_at_the_timeout_with_its_process_group(tmp_path):
    script = write_replay_hccn(tmp_path, {**SAMPLE_REPLIES, "-i 0 -link -g": "hang"})
    source, health = make_source([str(script)], timeout=0.5)
    start = time.monotonic()
    await source.refresh_fast()
    assert time.monotonic() - start < 5
    assert errors(health) == {("hccn_link", "timeout"): 1}
    assert calls(tmp_path) == ["-i 0 -link -g"]  # no timeout per command on a wedged chip
    pgid = int((tmp_path / "hang.pgid").read_text())
    deadline = time.monotonic() + 5
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the hanging hccn_tool's process group survived"
        await asyncio.sleep(0.05)


async def test_missing_binary_is_counted_once_and_recovers_when_installed(tmp_path):
    path = tmp_path / "bin" / "hccn_tool"
    source, health = make_source([str(path)])
    for _ in range(3):
        await run_all(source)
    assert errors(health) == {("hccn_link", "not_found"): 1}
    assert source.part().ports == ()
    path.parent.mkdir()
    write_replay_hccn(path.parent, SAMPLE_REPLIES)
    await source.refresh_fast()
    assert source.part().ports[0].link_up is True
    assert success(health)["hccn_link"] is True


async def test_link_down_speed_is_absent_not_an_error(tmp_path):
    replies = {
        **SAMPLE_REPLIES,
        "-i 0 -link -g": "link__950-A5__1",
        "-i 0 -speed -g": ("text:Execute failed: Link status is down.", 22, "err"),
    }
    source, health = make_source([str(write_replay_hccn(tmp_path, replies))])
    await source.refresh_fast()
    (port,) = source.part().ports
    assert port.link_up is False and port.speed_bytes_per_second is None
    assert errors(health) == {}


async def test_a5_ports_from_dev_info_and_u_p_arguments(tmp_path):
    replies = {
        "-g -dev_info -i 1": "dev_info__950-A5__1",
        "-g -link -i 1 -u 0 -p *": "link__950-A5__1",
        "-g -link_stat -i 1 -u 0 -p *": "link_stat__950-A5__1",
        "-g -speed -i 1 -u 0 -p *": "speed__950-A5__1",
        "-g -net_health -i 1 -u 0 -p *": "net_health__unknown__3",
        "-g -stat -i 1 -u 0 -p *": "stat__950-A5__1",
    }
    chip = ChipSample(npu=1, chip=0, device=None, up=True, model="Ascend950PR")
    source, health = make_source([str(write_replay_hccn(tmp_path, replies))], chips=(chip,))
    await source.refresh_fast()
    ports = source.part().ports
    assert [p.port for p in ports] == ["0/4", "0/5", "0/6"]
    assert all(p.link_up is False and p.speed_bytes_per_second == 50e9 for p in ports)
    assert ports[0].link_down_transitions == 2 and ports[0].health == "Success"
    assert NetworkCounter("rx", "crc", 0) in ports[0].errors
    assert "-g -link -i 1 -u 0 -p 5" in calls(tmp_path)
    assert errors(health) == {}


async def test_the_simulator_through_the_same_path():
    model = MODELS["910b3"]
    t = ECC_EPOCH + 5 * 120 + 100  # inside a down phase of the flapping link
    command = [sys.executable, "-m", "exporter.simulator.hccn", "--model", "910b3", "--scenario", "link-flap", "--time", str(t), "--"]
    chips = tuple(
        ChipSample(npu=c.npu_id, chip=c.chip_id, device=c.logic_id, up=True, model="910B3")
        for c in model.chips
        if c.logic_id in (LINK_FLAP_LOGIC_ID, 3)
    )
    source, health = make_source(command, chips=chips, timeout=20)
    await run_all(source)
    state = simulate_network(model, "link-flap", t)
    ports = {p.device: p for p in source.part().ports}
    assert set(ports) == {0, 3}
    for logic_id, port in ports.items():
        expected = state.port(logic_id)
        assert port.link_up is expected.link_up
        assert (port.link_up_transitions, port.link_down_transitions) == (expected.up_count, expected.down_count)
        assert port.health == expected.net_health
        assert port.optical_lanes[1].rx_power_watts == pytest.approx(expected.optical.rx_power_mw[1] / 1000)
        assert port.receive_bytes_per_second == pytest.approx(expected.rx_centi_mb_per_s / 100 * 1e6)
        counters = classify_counters(expected.counters)
        assert port.packets == counters.packets and port.errors == counters.errors
    assert ports[0].link_up is False and ports[0].speed_bytes_per_second is None
    assert ports[3].link_up is True and ports[3].speed_bytes_per_second == 25e9
    assert (ports[0].link_up_transitions, ports[0].link_down_transitions) == (6, 6)
    assert all(success(health).values())


def test_tool_id_is_what_hccn_tool_expects():
    a3_die = ChipSample(npu=1, chip=1, device=3, up=True, model="Ascend910", phy_id=9)
    assert tool_id(a3_die, 2) == 9  # A3: physical id
    assert tool_id(ChipSample(npu=5, chip=0, device=2, up=True, model="910B3")) == 5  # card = phy
    assert tool_id(ChipSample(npu=4, chip=0, device=None, up=True, model="Ascend950PR")) == 4
    assert tool_id(ChipSample(npu=4, chip=1, device=7, up=True, model="X"), 2) == 7
    assert tool_id(ChipSample(npu=4, chip=1, device=None, up=True, model="X"), 2) is None


def test_counter_classification():
    found = classify_counters(
        [
            ("mac_rx_pfc_pkt_num", 5),
            ("mac_tx_pfc_pri3_pkt_num", 4),
            ("roce_rx_cnp_pkt_num", 3),
            ("mac_rx_fcs_err_pkt_num", 2),
            ("roce_new_pkt_rty_num", 1),
            ("roce_ecn_db_num", 6),
            ("mac_tx_total_oct_num", 1000),
            ("roce_cqe_num", 9),
            ("something_new", 7),
            ("port_id", 4),
            ("drop_ind_cnt_rx", 8),
            ("ub_mem_pkt_cnt_tx", 11),
            ("mac_rx_pfc_pkt_num", 99),
        ]
    )
    assert found.packets == (
        NetworkCounter("rx", "pfc", 5),
        NetworkCounter("tx", "pfc_pri3", 4),
        NetworkCounter("rx", "cnp", 3),
        NetworkCounter("rx", "ecn", 6),
        NetworkCounter("tx", "ub_mem", 11),
    )
    assert found.errors == (
        NetworkCounter("rx", "fcs", 2),
        NetworkCounter("tx", "retry", 1),
        NetworkCounter("rx", "drop", 8),
    )
    assert found.bytes == (NetworkCounter("tx", "mac", 1000),)


async def test_no_chips_yet_means_no_calls(tmp_path):
    script = write_replay_hccn(tmp_path, SAMPLE_REPLIES)
    source, health = make_source([str(script)], chips=())
    await run_all(source)
    assert calls(tmp_path) == [] and source.part().ports == () and health.statuses() == ()


async def test_old_readings_are_dropped_by_their_own_age_limit(tmp_path):
    script = write_replay_hccn(tmp_path, SAMPLE_REPLIES)
    now = [1000.0]
    health = HealthRegistry()
    options = HccnOptions(timeout=5, interval=10, slow_interval=60)
    source = HccnSource(
        options, CommandRunner(timeout=5), health, chips=lambda: (CHIP0,), command=(str(script),), max_age=30, clock=lambda: now[0]
    )
    await run_all(source)
    assert age_limit(options, 30, "link") == 30 and age_limit(options, 30, "bandwidth") == 120  # two slow intervals
    now[0] += 100  # fast readings stale, slow ones (bandwidth, optical, ip) still served
    (port,) = source.part().ports
    assert port.link_up is None and port.health is None
    assert port.receive_bytes_per_second == pytest.approx(266.84e6) and port.optical_present is False
    now[0] += 100
    assert source.part().ports == ()


async def test_fast_and_slow_runs_never_overlap_on_one_chip(tmp_path):
    """The stand-in answers "busy" when two calls for one device overlap, as hccn_tool does."""
    from tests.support.hccn import FIXTURES

    script = tmp_path / "hccn_tool"
    script.write_text(
        "#!/bin/sh\n"
        f'lock="{tmp_path}/lock-$2"\n'
        'if ! mkdir "$lock" 2>/dev/null; then echo "hccn_tool is busy, please try again."; exit 11; fi\n'
        "sleep 0.05\n"
        'case "$3" in\n'
        f"  -link) cat {FIXTURES}/link__unknown__1.txt ;;\n"
        f"  -link_stat) cat {FIXTURES}/link_stat__unknown__3.txt ;;\n"
        "  -speed) echo 'Speed: 200000 Mb/s' ;;\n"
        f"  -net_health) cat {FIXTURES}/net_health__unknown__3.txt ;;\n"
        f"  -stat) cat {FIXTURES}/stat__950-A5__1.txt ;;\n"
        f"  -bandwidth) cat {FIXTURES}/bandwidth__950-A5__1.txt ;;\n"
        f"  -optical) cat {FIXTURES}/optical__910A__1__mangled.txt ;;\n"
        f"  -ip) cat {FIXTURES}/ip__910B1__1.txt ;;\n"
        "esac\n"
        'rmdir "$lock"\n'
    )
    script.chmod(0o755)
    chips = tuple(ChipSample(npu=n, chip=0, device=n, up=True, model="910B3") for n in range(2))
    source, health = make_source([str(script)], chips=chips)
    await asyncio.gather(source.refresh_fast(), source.refresh_slow())
    assert errors(health) == {}
    assert len(source.part().ports) == 2


async def test_a_product_without_roce_is_counted_per_command_not_per_chip(tmp_path):
    """Inference cards with hccn_tool installed: every command unsupported, asked once."""
    script = write_replay_hccn(tmp_path, {}, default=("text:The command is not supported on this product.", 13))
    chips = tuple(ChipSample(npu=n, chip=0, device=n, up=True, model="310P3") for n in range(8))
    source, health = make_source([str(script)], chips=chips)
    for _ in range(2):
        await run_all(source)
    assert set(errors(health).values()) == {1}  # one chip asked first, the others never
    assert len(calls(tmp_path)) == 8
    assert all(success(health).values()) and source.part().ports == ()


async def test_a_port_sample_is_built_again_only_when_its_readings_change(tmp_path):
    script = write_replay_hccn(tmp_path, SAMPLE_REPLIES)
    now = [1000.0]
    options = HccnOptions(timeout=5, interval=10, slow_interval=60)
    source = HccnSource(
        options,
        CommandRunner(timeout=5),
        HealthRegistry(),
        chips=lambda: (CHIP0,),
        command=(str(script),),
        max_age=30,
        clock=lambda: now[0],
    )
    await run_all(source)
    first = source.part()
    assert source.part() is first  # nothing new: the same part, nothing rebuilt
    await source.refresh_fast()
    again = source.part()
    assert again is not first and again == first  # new readings of the same values: rebuilt, equal
    now[0] += 100  # the fast readings age out
    assert source.part().ports[0].link_up is None and first.ports[0].link_up is not None
