"""The simulator executable: answers npu-smi's command line with npu-smi's text.

    python -m exporter.simulator [--model M] [--scenario S] [--seed N] [--time T]
                                 [--fault F] [--processes N] [--] <npu-smi args>

Simulator options come first (defaults from CANN_SIM_MODEL, CANN_SIM_SCENARIO,
CANN_SIM_SEED, CANN_SIM_TIME, CANN_SIM_FAULT, CANN_SIM_PROCESSES; CANN_SIM_FAULT_FILE names a
file whose fault spec is re-read on every call), so a wrapper script can
stand in for `npu-smi` unchanged. CANN_SIM_TIME / --time freeze the clock (epoch seconds).
Supported: `-v`, `info`, `info -h`, `info -m`, `info -l`,
`info -t usages|common|memory|power|temp|health|ecc|board|proc-mem|current-fault-event -i N [-c C]`,
`info -t volt|pcie-err|err-count|sensors|sio-info|hccs|spod-info -i N [-c C]`,
`info -t hccs-bw -i N -c C [-time MS]` (sleeps MS, at most 10 s, as the real call blocks),
`info watch [-i N] [-c C] [-d 1..100] [-s ptaicmbnu] [--count N]` (--count is ours).

Output goes to stdout, as npu-smi's printf does. Exit codes are not captured from real
hardware: 0 on success, EXIT_INVALID for bad arguments/ids, EXIT_DCMI for dcmi errors.
"""

from __future__ import annotations

import itertools
import sys
import time

from exporter.simulator import faults as faultlib
from exporter.simulator import render, watch
from exporter.simulator.faults import Fault
from exporter.simulator.hardware import MAX_SAMPLE_MS
from exporter.simulator.models import get_model
from exporter.simulator.options import SimOptions, ToolOptions, run_main
from exporter.simulator.options import parse_sim_options as _parse_options
from exporter.simulator.record import Record
from exporter.simulator.scenarios import (
    SCENARIOS,
    NodeState,
    flap_npu_id,
    simulate,
    without_npu,
)

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import BinaryIO

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_DCMI = 255

_OPTIONS = ToolOptions("CANN_SIM_FAULT", "CANN_SIM_FAULT_FILE", SCENARIOS, faultlib.parse_faults, processes=True)


class Command(Record):
    """One parsed npu-smi invocation; ``key`` is what a fault scope matches."""

    key: str  # info, m, l, watch, version, help, or a -t type
    npu_id: int | None = None
    chip_id: int | None = None
    delay: int = 1
    letters: str | None = None
    count: int | None = None
    sample_ms: int | None = None  # `-t hccs-bw -time MS`


class Result(Record):
    text: str
    code: int = EXIT_OK


def parse_sim_options(argv: Sequence[str], env: Mapping[str, str]) -> tuple[SimOptions, list[str]]:
    """Split our leading options (flags beat env vars) from the npu-smi arguments."""
    return _parse_options(argv, env, _OPTIONS)


# --- npu-smi's own command line --------------------------------------------------------------


def parse_command(args: Sequence[str]) -> Command | Result:
    """npu-smi argv (after our options) -> a Command, or the usage error npu-smi would print."""
    if not args or args[0] in ("-h", "--help"):
        return Result(render.USAGE_TOP + "\n", EXIT_OK if args else EXIT_INVALID)
    if args[0] == "-v":
        return Command("version")
    if args[0] != "info":
        return Result(render.USAGE_TOP + "\n", EXIT_INVALID)
    rest = list(args[1:])
    if not rest:
        return Command("info")
    if rest[0] in ("-h", "--help"):
        return Command("help")
    if rest[0] in ("-m", "-l") and len(rest) == 1:
        return Command(rest[0][1:])
    if rest[0] == "proc":
        return Result("This device does not support querying proc.\n", EXIT_INVALID)
    if rest[0] == "watch":
        return _parse_watch(rest[1:])
    return _parse_type_query(rest)


def _pairs(args: Sequence[str]) -> dict[str, str] | None:
    """`-x value` pairs; None if the shape is wrong (odd count, repeated or bare words)."""
    if len(args) % 2:
        return None
    pairs = dict(zip(args[::2], args[1::2]))
    return pairs if len(pairs) * 2 == len(args) else None


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _param_error(flag: str) -> Result:
    return Result(f"Error parameter of {flag}\n{render.USAGE_INFO}\n", EXIT_INVALID)


def _parse_type_query(args: Sequence[str]) -> Command | Result:
    pairs = _pairs(args)
    allowed = {"-t", "-i", "-c", "-time"} if pairs and pairs.get("-t") == "hccs-bw" else {"-t", "-i", "-c"}
    if pairs is None or not set(pairs) <= allowed or "-t" not in pairs:
        return Result(render.USAGE_INFO + "\n", EXIT_INVALID)
    if pairs["-t"] not in render.RENDERERS:
        return Result(render.INVALID_TYPE, EXIT_INVALID)
    npu_id, chip_id = _int(pairs.get("-i")), _int(pairs.get("-c"))
    if npu_id is None:
        return _param_error("-i")
    if "-c" in pairs and chip_id is None:
        return _param_error("-c")
    sample_ms = _int(pairs.get("-time", "1000"))
    if sample_ms is None or sample_ms <= 0:
        return _param_error("-time")
    return Command(pairs["-t"], npu_id=npu_id, chip_id=chip_id, sample_ms=sample_ms if pairs["-t"] == "hccs-bw" else None)


def _parse_watch(args: Sequence[str]) -> Command | Result:
    pairs = _pairs(args)
    if pairs is None or not set(pairs) <= {"-i", "-c", "-d", "-s", "--count"}:
        return Result(render.USAGE_INFO + "\n", EXIT_INVALID)
    npu_id, chip_id = _int(pairs.get("-i")), _int(pairs.get("-c"))
    delay, count = _int(pairs.get("-d", "1")), _int(pairs.get("--count"))
    letters = pairs.get("-s")
    if "-i" in pairs and npu_id is None:
        return _param_error("-i")
    if "-c" in pairs and chip_id is None:
        return _param_error("-c")
    if delay is None or not 1 <= delay <= 100:
        return _param_error("-d")
    if letters is not None and (not letters or set(letters) - set("ptaicmbnu")):
        return _param_error("-s")
    if "--count" in pairs and (count is None or count < 0):
        return _param_error("--count")
    return Command("watch", npu_id=npu_id, chip_id=chip_id, delay=delay, letters=letters, count=count)


def execute(command: Command, state: NodeState) -> Result:
    """Answer a non-streaming command from one state (pure)."""
    if command.key == "version":
        return Result(render.render_version(state))
    if command.key == "help":
        return Result(render.INFO_HELP)
    if command.key == "info":
        return Result(render.render_info(state))
    if command.key == "m":
        return Result(render.render_chip_map(state))
    if command.key == "l":
        return Result(render.render_card_list(state))
    npu_id = command.npu_id
    if npu_id is None:  # parse_command gives every -t query its -i
        return _param_error("-i")
    error = _check_ids(command, state, allow_mcu=command.key == "board")
    if error is not None:
        return error
    code = state.failure(command.key, npu_id)
    if code is not None:
        return Result(render.dcmi_error(code), EXIT_DCMI)
    return Result(render.RENDERERS[command.key](state, npu_id, command.chip_id))


def _check_ids(command: Command, state: NodeState, allow_mcu: bool = False) -> Result | None:
    if command.npu_id is None:
        return None
    if command.npu_id not in state.npu_ids:
        return Result(render.INVALID_CARD_ID, EXIT_INVALID)
    chips = {chip.chip_id for chip in state.chips_of(command.npu_id)}
    if allow_mcu:
        chips.add(state.model.chips_per_npu)
    if command.chip_id is not None and command.chip_id not in chips:
        return _param_error("-c")
    return None


# --- running ------------------------------------------------------------------------------


def _state(options: SimOptions, t: float, faults: tuple[Fault, ...]) -> NodeState:
    model = get_model(options.model, options.processes)
    state = simulate(model, options.scenario, t, options.seed)
    if faultlib.first(faults, "flap") and faultlib.is_flap_down(t):
        state = without_npu(state, flap_npu_id(model))
    for fault in faults:
        if fault.kind == "gone" and fault.value is not None:
            state = without_npu(state, int(fault.value))
    return state


def _transform(data: bytes, faults: tuple[Fault, ...], options: SimOptions, t: float) -> bytes:
    if faultlib.first(faults, "garbage"):
        return faultlib.garbage(options.seed, t)
    if faultlib.first(faults, "truncate"):
        data = faultlib.truncate(data)
    if faultlib.first(faults, "huge"):
        data = faultlib.huge(data)
    return data


def _before_output(faults: tuple[Fault, ...]) -> Result | None:
    """Faults that act before any output: hang, delay, dcmi failure."""
    faultlib.delay(faults)
    for fault in faults:
        if fault.dcmi_code is not None:
            return Result(render.dcmi_error(fault.dcmi_code), EXIT_DCMI)
    return None


def _now(options: SimOptions, faults: tuple[Fault, ...]) -> float:
    """npu-smi's clock: the wall clock or CANN_SIM_TIME, shifted by `clock=S` faults."""
    return (time.time() if options.time is None else options.time) + faultlib.clock_offset(faults)


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def run(options: SimOptions, args: Sequence[str], out: BinaryIO) -> int:
    """Parse, apply faults, answer. ``out`` is a binary stream (sys.stdout.buffer)."""
    command = parse_command(args)
    if isinstance(command, Result):
        _write(out, command.text.encode())
        return command.code
    faults = tuple(f for f in faultlib.parse_faults(options.fault) if f.applies_to(command.key, command.npu_id))
    t0 = _now(options, faults)
    early = _before_output(faults)
    if early is not None:
        _write(out, early.text.encode())
        return faultlib.exit_code(early.code, faults)
    if command.key == "watch":
        return _watch(command, options, faults, out)
    result = execute(command, _state(options, t0, faults))
    if command.sample_ms is not None and result.code == EXIT_OK:
        time.sleep(min(command.sample_ms, MAX_SAMPLE_MS) / 1000)  # hccs-bw samples before it answers
    _write(out, _transform(result.text.encode(), faults, options, t0))
    return faultlib.exit_code(result.code, faults)


def _watch(command: Command, options: SimOptions, faults: tuple[Fault, ...], out: BinaryIO) -> int:
    """Header once, then one round of rows every ``delay`` seconds, each flushed."""
    t0 = _now(options, faults)
    state = _state(options, t0, faults)
    error = _check_ids(command, state)
    if error is not None:
        _write(out, error.text.encode())
        return error.code
    letters = watch.watch_letters(state.model, command.letters)
    header = watch.render_watch_header(state.model, letters)
    rounds = itertools.count() if command.count is None else range(command.count)
    for index in rounds:
        if index:
            time.sleep(command.delay)
            # A frozen clock still advances by the delay, so rows keep moving.
            t = _now(options, faults) if options.time is None else t0 + index * command.delay
            state = _state(options, t, faults)
        else:
            t = t0
        rows = watch.render_watch_rows(state, letters, command.npu_id, command.chip_id)
        _write(out, _transform((header if index == 0 else "").encode() + rows.encode(), faults, options, t))
    return faultlib.exit_code(EXIT_OK, faults)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("npu-smi", argv, parse_sim_options, lambda options, rest: run(options, rest, sys.stdout.buffer))
