"""The hccn_tool simulator: byte-exact formats, its command line and faults, the network
scenarios, and the round trip (the project's parsers read back the simulated state)."""

from __future__ import annotations

import calendar
import io
import itertools
import subprocess
import sys
import time

import pytest

from exporter.core.runner import CommandRunner, RunError
from exporter.hccn.parse import PARSERS, parse_link
from exporter.hccn.records import HccnError, IpConfig
from exporter.simulator import hccn as sim
from exporter.simulator.models import MODELS
from exporter.simulator.network import (
    ALL_SCENARIOS,
    DEGRADED_NETWORK_LOGIC_ID,
    FLAP_PERIOD_S,
    LINK_FLAP_LOGIC_ID,
    STAT_KEYS,
    LinkEvent,
    NetworkState,
    simulate_network,
)
from exporter.simulator.record import replace
from exporter.simulator.scenarios import ECC_EPOCH
from tests.support.hccn import fixture

T0 = 1_780_000_000.0


def state_at(t: float = T0, scenario: str = "healthy", model: str = "910b3") -> NetworkState:
    return simulate_network(MODELS[model], scenario, t, seed=1)


def epoch(asctime: str) -> float:
    return float(calendar.timegm(time.strptime(asctime, "%a %b %d %H:%M:%S %Y")))


# --- byte-exact formats --------------------------------------------------------------------


def test_link_and_net_health_lines():
    state = state_at()
    port = state.ports[0]
    assert sim.render_link(port, state) == fixture("link__unknown__1")
    assert sim.render_link(replace(port, link_up=False), state) == fixture("link__950-A5__1")
    for name in ("net_health__unknown__1", "net_health__unknown__2", "net_health__unknown__3"):
        status = fixture(name).split(": ")[1].strip()
        assert sim.render_net_health(replace(port, net_health=status), state) == fixture(name)


def test_link_stat_is_the_newer_driver_format():
    expected = fixture("link_stat__unknown__3")
    stamps = [line[13:37] for line in expected.splitlines()[4:]]
    events = tuple(LinkEvent(epoch(stamp), "UP" in line) for stamp, line in zip(stamps, expected.splitlines()[4:]))
    state = replace(state_at(), t=epoch("Tue Oct 28 21:46:46 2025"))
    port = replace(state.ports[0], up_count=2, down_count=1, events=events)
    assert sim.render_link_stat(port, state) == expected


def test_optical_block_matches_the_910_sample():
    # The sample's "present : not present" was edited in by its publisher (see its .src).
    expected = fixture("optical__910A__1__mangled").replace("present              : not present", "present              : present")
    state = state_at()
    optical = replace(
        state.ports[0].optical,
        temperature_celsius=47,
        vcc_mv=3262.90,
        serial_number="V8BD6H25033",
        identifier="QSFP+ or later",
        tx_power_mw=(4.4035, 1.3968, 1.4140, 1.4988),
        rx_power_mw=(1.0189, 0.0054, 0.9907, 1.0213),
        tx_bias_ma=(7.9360, 7.9280, 7.9360, 7.9240),
        rx_los_flags=0xFF,
        media_snr_db=(23.1211, 22.6289, 22.1875, 23.2969),
    )
    assert sim.render_optical(replace(state.ports[0], optical=optical), state) == expected


def test_ip_stat_speed_bandwidth_formats():
    state = state_at()
    port = replace(state.ports[0], address="29.1.112.213", netmask="255.255.0.0")
    assert sim.render_ip(port, state) == fixture("ip__910B1__1")
    # printf formats of tool_ext.c / tool_ops_ext.c (no verbatim 910B capture is public)
    assert sim.render_speed(port, state) == "Speed: 200000 Mb/s\n"
    assert sim.render_speed(replace(port, speed_mbps=None), state) == "Speed: Unknown!\n"
    text = sim.render_bandwidth(replace(port, tx_centi_mb_per_s=0, rx_centi_mb_per_s=26684), state)
    assert text == "Bandwidth TX:     0.00 MB/sec\nBandwidth RX:   266.84 MB/sec\n"


@pytest.mark.parametrize("name", ["stat__unknown__1__mangled", "stat__910A__1__mangled"])
def test_stat_lines_in_the_samples_order(name):
    sample = [line for line in fixture(name).splitlines() if line != "..."]
    values = dict(line.split(":") for line in sample[1:])
    assert set(values) <= set(STAT_KEYS)
    state = state_at()
    counters = tuple((key, int(values.get(key, 0))) for key in STAT_KEYS)
    rendered = sim.render_stat(replace(state.ports[0], counters=counters), state).splitlines()
    assert len(rendered) == 1 + 48
    positions = [rendered.index(line) for line in sample]
    assert positions == sorted(positions)


# --- command line and faults -----------------------------------------------------------------


def call(
    args: list[str], state: NetworkState | None = None, fault: str = "", scenario: str = "healthy", model: str = "910b3"
) -> tuple[int, str, str]:
    out, err = io.BytesIO(), io.BytesIO()
    options = sim.SimOptions(model=model, scenario=scenario, seed=1, time=T0, fault=fault)
    code = sim.run(options, args, out, err)
    return code, out.getvalue().decode(errors="replace"), err.getvalue().decode()


def test_both_syntaxes_and_the_ids():
    assert call(["-i", "3", "-link", "-g"]) == (0, "link status: UP\n", "")
    assert call(["-g", "-link", "-i", "3", "-u", "0", "-p", "4"])[1] == "link status: UP\n"
    assert call(["-i", "42", "-link", "-g"]) == (4, "", "Get invalid device id.\n")
    code, _, err = call(["-i", "0", "-lldp", "-g"])
    assert code == 3 and err.startswith("Get unknown option!")
    assert call(["-i", "0", "-link"])[0] == 3  # no -g


@pytest.mark.parametrize(
    "fault,code,stream,text",
    [
        ("busy", 11, "out", "hccn_tool is busy, please try again.\n"),
        ("permission", 12, "err", "permission denied: pls check this cmd run permission.\n"),
        ("unsupported", 13, "out", "The command is not supported on this product.\n"),
        ("unhealthy", 3, "err", "Get device health status failed!\n"),
        ("link:busy", 11, "out", "hccn_tool is busy, please try again.\n"),
    ],
)
def test_error_faults(fault, code, stream, text):
    got_code, out, err = call(["-i", "0", "-link", "-g"], fault=fault)
    assert got_code == code and (out if stream == "out" else err) == text


def test_scoped_faults_exit_and_garbage():
    assert call(["-i", "0", "-link", "-g"], fault="optical:no-optical")[:2] == (0, "link status: UP\n")
    assert call(["-i", "0", "-optical", "-g"], fault="optical:no-optical")[:2] == (20, "Optical module is not present.\n")
    assert call(["-i", "0", "-link", "-g"], fault="exit=5") == (5, "link status: UP\n", "")
    _, out, _ = call(["-i", "0", "-link", "-g"], fault="garbage")
    with pytest.raises(HccnError):
        parse_link(out)
    with pytest.raises(ValueError):
        sim.parse_faults("link:explode")
    with pytest.raises(ValueError):
        sim.parse_faults("lldp:busy")


def test_missing_device_and_inference_cards():
    missing = MODELS["910b3"].chips[-1].logic_id  # degraded: the last NPU fell off the bus
    assert call(["-i", str(missing), "-link", "-g"], scenario="degraded") == (4, "", "The device is not exist!\n")
    assert call(["-i", "0", "-link", "-g"], model="310p-duo") == (13, "The command is not supported on this product.\n", "")


def test_options_from_the_npu_smi_simulator_environment():
    env = {"CANN_SIM_MODEL": "a3", "CANN_SIM_SCENARIO": "link-flap", "CANN_SIM_TIME": "5", "CANN_SIM_FAULT": "usages:hang"}
    options, rest = sim.parse_sim_options(["--seed", "3", "--", "-i", "0", "-link", "-g"], env)
    assert (options.model, options.scenario, options.seed, options.time, options.fault) == ("a3", "link-flap", 3, 5.0, "")
    assert rest == ["-i", "0", "-link", "-g"]
    options, _ = sim.parse_sim_options([], {**env, "CANN_SIM_HCCN_FAULT": "busy"})
    assert options.fault == "busy"
    with pytest.raises(ValueError):
        sim.parse_sim_options(["--scenario", "nope"], {})


def test_the_module_runs_as_hccn_tool():
    proc = subprocess.run(
        [sys.executable, "-m", "exporter.simulator.hccn", "--scenario", "nope"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2 and "unknown scenario" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "exporter.simulator.hccn", "--time", str(T0), "--", "-i", "1", "-net_health", "-g"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "net health status: Success\n")


async def test_hang_fault_needs_the_process_group_kill():
    runner = CommandRunner(timeout=1.0)
    argv = [sys.executable, "-m", "exporter.simulator.hccn", "--fault", "hang", "--", "-i", "0", "-link", "-g"]
    start = time.monotonic()
    with pytest.raises(RunError) as info:
        await runner.run(argv)
    assert info.value.reason == "timeout" and time.monotonic() - start < 8


# --- scenarios -------------------------------------------------------------------------------


def test_link_flap_goes_down_and_up_over_time():
    base = ECC_EPOCH + 100 * FLAP_PERIOD_S
    samples = [state_at(base + step, "link-flap").port(LINK_FLAP_LOGIC_ID) for step in range(0, 241, 10)]
    ups = [s.link_up for s in samples]
    assert True in ups and False in ups
    transitions = sum(1 for a, b in itertools.pairwise(ups) if a != b)
    assert transitions == 4  # two flaps in two periods
    assert samples[-1].down_count - samples[0].down_count == 2
    assert all(a.up_count <= b.up_count and a.down_count <= b.down_count for a, b in itertools.pairwise(samples))
    assert all(s.speed_mbps is None and s.net_health != "Success" for s in samples if not s.link_up)
    assert all(len(s.events) == 10 and s.events[0].up == s.link_up for s in samples)
    others = state_at(base + 100, "link-flap").ports[1:]
    assert all(port.link_up and port.down_count == 0 for port in others)


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_counters_never_decrease(scenario):
    earlier, later = state_at(T0, scenario), state_at(T0 + 37, scenario)
    for a, b in zip(earlier.ports, later.ports):
        assert all(x[1] <= y[1] for x, y in zip(a.counters, b.counters))


def test_degraded_network_chip():
    state = state_at(scenario="degraded")
    port = state.port(DEGRADED_NETWORK_LOGIC_ID)
    assert port.net_health == "Fault"
    assert dict(port.counters)["roce_rx_err_pkt_num"] > 0
    assert port.optical.rx_power_mw[1] < 0.1445
    assert len(state.missing_ids) == 1 and state.port(state.missing_ids[0]) is None
    assert all(port.net_health == "Success" for port in state.ports if port.logic_id != DEGRADED_NETWORK_LOGIC_ID)


# --- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["910b3", "a3"])
@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_round_trip(model, scenario):
    t = ECC_EPOCH + 1000 * FLAP_PERIOD_S + 100  # the flapping link is down
    state = state_at(t, scenario, model)
    assert state.ports
    for port in state.ports:

        def parse(command: str, port=port):
            reply = sim.execute(sim.Command(command, port.tool_id), state)
            assert reply.code == 0
            return PARSERS[command](reply.text)

        assert parse("link").up is port.link_up
        stats = parse("link_stat")
        assert (stats.up_count, stats.down_count) == (port.up_count, port.down_count)
        assert [r.up for r in stats.records] == [e.up for e in port.events]
        assert [epoch(r.timestamp) for r in stats.records] == [int(e.t) for e in port.events]
        assert parse("speed").megabits_per_second == port.speed_mbps
        assert parse("net_health").status == port.net_health
        assert parse("stat").counters == port.counters
        optical = parse("optical")
        assert optical.present is True and optical.temperature_celsius == port.optical.temperature_celsius
        assert optical.vcc_mv == port.optical.vcc_mv
        assert [lane.rx_power_mw for _, lane in optical.lanes] == list(port.optical.rx_power_mw)
        assert [lane.tx_power_mw for _, lane in optical.lanes] == list(port.optical.tx_power_mw)
        assert optical.rx_los_flags == port.optical.rx_los_flags
        bandwidth = parse("bandwidth")
        assert round(bandwidth.tx_mb_per_second * 100) == port.tx_centi_mb_per_s
        assert round(bandwidth.rx_mb_per_second * 100) == port.rx_centi_mb_per_s
        assert parse("ip") == (IpConfig(port.address, port.netmask),)
    if scenario == "link-flap":
        assert state.port(LINK_FLAP_LOGIC_ID).link_up is False
