"""What the npu-smi and hccn_tool stand-ins share: their leading options and process entry."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

EXIT_SIMULATOR_USAGE = 2  # our own options were wrong (not a behaviour of the tool)

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    Opts = TypeVar("Opts")


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
