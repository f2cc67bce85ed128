"""What the npu-smi and hccn_tool stand-ins share: their leading options and process entry."""

from __future__ import annotations

import math
import os
import sys

from exporter.simulator.models import MODEL_NAMES
from exporter.simulator.record import Record

EXIT_SIMULATOR_USAGE = 2  # our own options were wrong (not a behaviour of the tool)

# Both tools describe the same node: model, scenario, seed and time from the same variables.
_FLAGS = {"--model": "model", "--scenario": "scenario", "--seed": "seed", "--time": "time", "--fault": "fault"}
_ENV = {"model": "CANN_SIM_MODEL", "scenario": "CANN_SIM_SCENARIO", "seed": "CANN_SIM_SEED", "time": "CANN_SIM_TIME"}

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import TypeVar

    Opts = TypeVar("Opts")


class SimOptions(Record):
    model: str = "910b3"
    scenario: str = "healthy"
    seed: int = 0
    time: float | None = None  # None: the wall clock
    fault: str = ""
    processes: int | None = None  # npu-smi's processes per busy chip (None: the model's default)


class ToolOptions(Record):
    """How one stand-in reads its options beyond the shared ones."""

    fault_env: str  # its fault spec's variable (the tools' fault kinds differ)
    fault_file_env: str  # a file whose fault spec is re-read on every call
    scenarios: tuple[str, ...]
    parse_faults: Callable[[str], object]  # raises ValueError naming a bad entry
    processes: bool = False  # --processes / CANN_SIM_PROCESSES


def parse_sim_options(argv: Sequence[str], env: Mapping[str, str], tool: ToolOptions) -> tuple[SimOptions, list[str]]:
    """Split our leading options (flags beat env vars) from the tool's own arguments."""
    flags, env_names = dict(_FLAGS), {**_ENV, "fault": tool.fault_env}
    if tool.processes:
        flags["--processes"], env_names["processes"] = "processes", "CANN_SIM_PROCESSES"
    raw, args = split_options(argv, env, flags, env_names, tool.fault_file_env)
    defaults = SimOptions()
    try:
        options = SimOptions(
            model=raw.get("model", defaults.model),
            scenario=raw.get("scenario", defaults.scenario),
            seed=int(raw.get("seed", defaults.seed)),
            time=float(raw["time"]) if "time" in raw else None,
            fault=raw.get("fault", ""),
            processes=int(raw["processes"]) if "processes" in raw else None,
        )
    except ValueError as exc:
        raise ValueError(f"bad simulator option: {exc}") from None
    if options.time is not None and not math.isfinite(options.time):
        raise ValueError(f"bad simulator option: time {options.time!r} is not a finite epoch time")
    if options.model not in MODEL_NAMES:
        raise ValueError(f"unknown model {options.model!r}; choose from {', '.join(MODEL_NAMES)}")
    if options.scenario not in tool.scenarios:
        raise ValueError(f"unknown scenario {options.scenario!r}; choose from {', '.join(tool.scenarios)}")
    tool.parse_faults(options.fault)
    return options, args


def split_options(
    argv: Sequence[str],
    env: Mapping[str, str],
    flags: Mapping[str, str],
    env_names: Mapping[str, str],
    fault_file_env: str,
) -> tuple[dict[str, str], list[str]]:
    """Raw option values (flags beat env vars) and the tool's own arguments after them.

    ``flags`` maps `--flag` to a field, ``env_names`` a field to its variable. The file named
    by ``fault_file_env`` is re-read on every call and its faults join the `fault` field, so
    a test can change faults under a running exporter. Raises ValueError for a flag
    without a value.
    """
    raw = {field: env[name] for field, name in env_names.items() if env.get(name)}
    fault_file = env.get(fault_file_env)
    if fault_file:
        try:
            with open(fault_file, encoding="utf-8") as handle:
                raw["fault"] = ",".join(filter(None, [raw.get("fault", ""), handle.read().strip()]))
        except FileNotFoundError:
            pass
    args = list(argv)
    while args:
        if args[0] == "--":
            args.pop(0)
            break
        flag, eq, inline = args[0].partition("=")
        if flag not in flags:
            break
        args.pop(0)
        if not eq:
            if not args:
                raise ValueError(f"{flag} needs a value")
            inline = args.pop(0)
        raw[flags[flag]] = inline
    return raw, args


def run_main(
    tool: str,
    argv: Sequence[str] | None,
    parse: Callable[[Sequence[str], Mapping[str, str]], tuple[Opts, list[str]]],
    run: Callable[[Opts, list[str]], int],
) -> int:
    """A stand-in's process entry: its options (exit 2 when wrong), then ``run`` on the tool's
    arguments. A reader that went away (e.g. `| head`) ends it quietly, as a killed tool would."""
    try:
        options, rest = parse(sys.argv[1:] if argv is None else argv, os.environ)
    except ValueError as exc:
        print(f"{tool} simulator: {exc}", file=sys.stderr)
        return EXIT_SIMULATOR_USAGE
    try:
        return run(options, rest)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
