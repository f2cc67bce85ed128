"""The hccn_tool simulator: answers hccn_tool's command line with hccn_tool's text.

    python -m exporter.simulator.hccn [--model M] [--scenario S] [--seed N] [--time T]
                                      [--fault F] [--] <hccn_tool args>

Model, scenario, seed and time default from the npu-smi simulator's CANN_SIM_MODEL,
CANN_SIM_SCENARIO, CANN_SIM_SEED and CANN_SIM_TIME, so both tools describe the same node.
Faults come from CANN_SIM_HCCN_FAULT (and CANN_SIM_HCCN_FAULT_FILE, re-read on every call):
npu-smi's fault kinds mean nothing here, so the variables are separate. A spec is a
comma-separated list of ``[command:]kind[=value]`` (command = link, link_stat, optical ...):

- ``hang``: block forever with a child holding stdout (only a process-group kill ends it);
- ``slow=SECONDS``; ``exit=CODE`` (normal output, then CODE);
- ``busy`` ("hccn_tool is busy, please try again.", stdout, exit 11), ``permission``
  (stderr, exit 12), ``unsupported`` (stdout, exit 13), ``unhealthy`` (the 300 s health
  wait's end: "Get device health status failed!", exit 3), ``no-optical`` (optical module
  absent, stdout, exit 20), ``garbage`` (random bytes).

Commands: `-i N -<cmd> -g` (910B/A3 syntax; `-g -<cmd> -i N` is accepted too) for link,
link_stat, speed, net_health, stat, optical, bandwidth, ip. N is the chip's physical id (A3)
or logic id (910B, where they are equal). Output is byte-exact to the 910B fixtures in
tests/fixtures/hccn. `-bandwidth` answers at once instead of measuring for a second.
"""

from __future__ import annotations

import sys
import time

from exporter.simulator import faults as faultlib
from exporter.simulator import network as n
from exporter.simulator.faults import Fault
from exporter.simulator.models import get_model
from exporter.simulator.network import (
    ALL_SCENARIOS,
    NetworkState,
    PortState,
    simulate_network,
)
from exporter.simulator.options import SimOptions, ToolOptions, run_main
from exporter.simulator.options import parse_sim_options as _parse_options
from exporter.simulator.record import Record

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import BinaryIO

COMMANDS = ("link", "link_stat", "speed", "net_health", "stat", "optical", "bandwidth", "ip")
FAULT_KINDS = ("hang", "slow", "exit", "busy", "permission", "unsupported", "unhealthy", "no-optical", "garbage")

EXIT_OK = 0

# (text, stream, exit status) of hccn_tool's error paths (docs/formats/hccn_tool.md, "Errors and exit codes").
BUSY = ("hccn_tool is busy, please try again.\n", "out", 11)
PERMISSION = ("permission denied: pls check this cmd run permission.\n", "err", 12)
UNSUPPORTED = ("The command is not supported on this product.\n", "out", 13)
UNHEALTHY = ("Get device health status failed!\n", "err", 3)
NO_OPTICAL = ("Optical module is not present.\n", "out", 20)
NO_DEVICE = ("The device is not exist!\n", "err", 4)
INVALID_ID = ("Get invalid device id.\n", "err", 4)
UNKNOWN_OPTION = ("Get unknown option!\n" + "Usage: hccn_tool -i <device_id> -<cmd> -g|-s [options]\n", "err", 3)


class Command(Record):
    name: str  # one of COMMANDS
    tool_id: int


class Reply(Record):
    text: str
    stream: str = "out"  # out or err
    code: int = EXIT_OK


# --- options ------------------------------------------------------------------------------


def parse_sim_options(argv: Sequence[str], env: Mapping[str, str]) -> tuple[SimOptions, list[str]]:
    """Split our leading options (flags beat env vars) from hccn_tool's arguments."""
    return _parse_options(argv, env, _OPTIONS)


def parse_faults(spec: str | None) -> tuple[Fault, ...]:
    """Parse a fault spec (scopes: hccn_tool's commands); raises ValueError naming the bad entry."""
    faults = []
    for item, scope, kind, value in faultlib.parse_entries(spec, FAULT_KINDS, ("slow", "exit")):
        if scope and scope not in COMMANDS:
            raise ValueError(f"unknown command {scope!r} in {item!r}; commands: {', '.join(COMMANDS)}")
        faults.append(Fault(kind, value, scope or None))
    return tuple(faults)


_OPTIONS = ToolOptions("CANN_SIM_HCCN_FAULT", "CANN_SIM_HCCN_FAULT_FILE", ALL_SCENARIOS, parse_faults)


# --- hccn_tool's command line ---------------------------------------------------------------


def parse_command(args: Sequence[str]) -> Command | Reply:
    """`-i N -<cmd> -g` or `-g -<cmd> -i N [-u U -p P] [-time MS]`."""
    words = list(args)
    tool_id: int | None = None
    name: str | None = None
    get = False
    index = 0
    while index < len(words):
        word = words[index]
        if word in ("-i", "-u", "-p", "-time"):
            if index + 1 >= len(words):
                return Reply(*UNKNOWN_OPTION)
            if word == "-i":
                value = words[index + 1]
                if not (value.isdigit() and len(value) <= 2):
                    return Reply(*INVALID_ID)
                tool_id = int(value)
            index += 2
            continue
        if word == "-g":
            get = True
        elif word.startswith("-") and word[1:] in COMMANDS and name is None:
            name = word[1:]
        else:
            return Reply(*UNKNOWN_OPTION)
        index += 1
    if name is None or not get or tool_id is None:
        return Reply(*UNKNOWN_OPTION)
    return Command(name, tool_id)


def execute(command: Command, state: NetworkState) -> Reply:
    """Answer one query from the state (pure)."""
    if not state.supported:
        return Reply(*UNSUPPORTED)
    if command.tool_id in state.missing_ids:
        return Reply(*NO_DEVICE)
    port = state.port(command.tool_id)
    if port is None:
        return Reply(*INVALID_ID)
    return Reply(RENDERERS[command.name](port, state))


# --- renderers (byte-exact to the 910B fixtures) ----------------------------------------------


def asctime(t: float) -> str:
    """C asctime() without the newline: day of month padded with a space. UTC, so the
    simulator prints the same text on every host (hccn_tool prints host local time)."""
    return time.asctime(time.gmtime(t))


def render_link(port: PortState, state: NetworkState) -> str:
    return f"link status: {'UP' if port.link_up else 'DOWN'}\n"


def render_link_stat(port: PortState, state: NetworkState) -> str:
    prefix = f"[devid {port.tool_id}]"
    lines = [
        f"{prefix}current time        : {asctime(state.t)}",
        f"{prefix}link up count       : {port.up_count}",
        f"{prefix}link down count     : {port.down_count}",
        f"{prefix}link change records :",
    ]
    lines += [f"{prefix}    {asctime(e.t)}    {'LINK UP' if e.up else 'LINK DOWN'}" for e in port.events]
    return "\n".join(lines) + "\n"


def render_speed(port: PortState, state: NetworkState) -> str:
    return "Speed: Unknown!\n" if port.speed_mbps is None else f"Speed: {port.speed_mbps} Mb/s\n"


def render_net_health(port: PortState, state: NetworkState) -> str:
    return f"net health status: {port.net_health}\n"


def render_stat(port: PortState, state: NetworkState) -> str:
    return "packet statistics:\n" + "".join(f"{key}:{value}\n" for key, value in port.counters)


def _kv(key: str, value: str) -> str:
    return f"{key:<21}: {value}\n"


def render_optical(port: PortState, state: NetworkState) -> str:
    o = port.optical
    out = [
        "optical info:\n",
        _kv("present", "present" if o.present else "not present"),
        _kv("temperature", f"{o.temperature_celsius} C"),
        _kv("high power enable reg", "enabled"),
        _kv("vendor name", o.vendor_name),
        _kv("vendor part number", o.part_number),
        _kv("vendor serial number", o.serial_number),
        _kv("vendor org unique id", o.org_unique_id),
        _kv("xsfp identifier", o.identifier),
        _kv("xsfp wave length", f"{o.wavelength_nm} nm"),
        _kv("manufact date code", o.date_code),
        _kv("Vcc", f"{o.vcc_mv:.2f} mV"),
    ]
    for lane in range(4):
        out.append(_kv(f"Tx Power{lane}", f"{o.tx_power_mw[lane]:.4f} mW"))
        out.append(_kv(f"Rx Power{lane}", f"{o.rx_power_mw[lane]:.4f} mW"))
    out += [
        _kv("Vcc High Thres", f"{n.VCC_HIGH_MV:.2f} mV"),
        _kv("Vcc Low Thres", f"{n.VCC_LOW_MV:.2f} mV"),
        _kv("Temp High Thres", f"{n.TEMP_HIGH_C} C"),
        _kv("Temp Low Thres", f"{n.TEMP_LOW_C} C"),
        _kv("TxPower High Thres", f"{n.TX_POWER_HIGH_MW:.4f} mW"),
        _kv("TxPower Low Thres", f"{n.TX_POWER_LOW_MW:.4f} mW"),
        _kv("RxPower High Thres", f"{n.RX_POWER_HIGH_MW:.4f} mW"),
        _kv("RxPower Low Thres", f"{n.RX_POWER_LOW_MW:.4f} mW"),
    ]
    out += [_kv(f"Tx Bias{lane}", f"{o.tx_bias_ma[lane]:.4f} mA") for lane in range(4)]
    out += [
        _kv("Tx Los Flag", "0x0"),
        _kv("Rx Los Flag", f"0x{o.rx_los_flags:x}"),
        _kv("Tx LoL Flag", "0x0"),
        _kv("Rx LoL Flag", f"0x{o.rx_los_flags:x}"),
    ]
    out += [_kv(f"Host SNR Lane{lane}", "not supported") for lane in range(4)]
    out += [_kv(f"Media SNR Lane{lane}", f"{o.media_snr_db[lane]:.4f} dB") for lane in range(4)]
    return "".join(out)


def render_bandwidth(port: PortState, state: NetworkState) -> str:
    tx, rx = port.tx_centi_mb_per_s, port.rx_centi_mb_per_s
    return f"Bandwidth TX: {tx // 100:5d}.{tx % 100:02d} MB/sec\nBandwidth RX: {rx // 100:5d}.{rx % 100:02d} MB/sec\n"


def render_ip(port: PortState, state: NetworkState) -> str:
    return f"ipaddr:{port.address}\nnetmask:{port.netmask}\n"


RENDERERS = {
    "link": render_link,
    "link_stat": render_link_stat,
    "speed": render_speed,
    "net_health": render_net_health,
    "stat": render_stat,
    "optical": render_optical,
    "bandwidth": render_bandwidth,
    "ip": render_ip,
}


# --- running ----------------------------------------------------------------------------------


def _fault_reply(faults: tuple[Fault, ...]) -> Reply | None:
    """Faults that replace the answer (after hang/slow, which only delay it)."""
    faultlib.delay(faults)
    kinds = {f.kind for f in faults}
    for kind, reply in (
        ("busy", BUSY),
        ("permission", PERMISSION),
        ("unsupported", UNSUPPORTED),
        ("unhealthy", UNHEALTHY),
        ("no-optical", NO_OPTICAL),
    ):
        if kind in kinds:
            return Reply(*reply)
    return None


def run(options: SimOptions, args: Sequence[str], out: BinaryIO, err: BinaryIO) -> int:
    command = parse_command(args)
    if isinstance(command, Reply):
        return _emit(command, out, err)
    faults = tuple(f for f in parse_faults(options.fault) if f.applies_to(command.name))
    t = time.time() if options.time is None else options.time
    reply = _fault_reply(faults)
    if reply is None:
        reply = execute(command, simulate_network(get_model(options.model), options.scenario, t, options.seed))
    if any(f.kind == "garbage" for f in faults):
        out.write(faultlib.garbage(options.seed, t))
        out.flush()
        return EXIT_OK
    return faultlib.exit_code(_emit(reply, out, err), faults)


def _emit(reply: Reply, out: BinaryIO, err: BinaryIO) -> int:
    stream = err if reply.stream == "err" else out
    stream.write(reply.text.encode())
    stream.flush()
    return reply.code


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("hccn_tool", argv, parse_sim_options, lambda options, rest: run(options, rest, sys.stdout.buffer, sys.stderr.buffer))


if __name__ == "__main__":
    sys.exit(main())
