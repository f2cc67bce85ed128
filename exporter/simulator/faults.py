"""Fault injection: the ways a real npu-smi misbehaves, on demand.

A spec is a comma-separated list of ``[scope:]kind[=value]``, e.g. ``usages:hang`` or
``slow=3,truncate``. ``scope`` names one command (``info`` = the overview table, ``m``,
``l``, ``watch``, ``version``, or a ``-t`` type such as ``usages``), optionally of one NPU
(``usages@3``: only ``-t usages -i 3``); without it the fault hits every command. Kinds:

- ``hang``: start a ``sleep`` child (same process group, same stdout) and sleep forever,
  so only a process-group kill ends the call and closes the pipe.
- ``slow=SECONDS``: answer after a delay.
- ``exit=CODE``: the normal output, then exit CODE.
- ``error-8005`` / ``error-8020``: the dcmi init failure texts, non-zero exit.
- ``garbage``: random bytes (not valid UTF-8) instead of the output.
- ``truncate``: the normal output cut in the middle of a line, at about 60 %.
- ``huge``: the normal output repeated to at least 8 MiB.
- ``flap``: the NPU holding logic id 0 is gone on odd minutes of the clock.
- ``gone=NPU``: that NPU id is gone from every output (a chip that disappears; remove the
  fault and it comes back).
- ``clock=SECONDS``: npu-smi's clock jumps by SECONDS (negative: backwards), on top of the
  wall clock or CANN_SIM_TIME; what it prints follows its clock (ECC counters, sawtooth phase).
"""

from __future__ import annotations

import math
import sys
import time

from exporter.simulator.record import Record

FAULT_KINDS = ("hang", "slow", "exit", "error-8005", "error-8020", "garbage", "truncate", "huge", "flap", "gone", "clock")
VALUED = ("slow", "exit", "gone", "clock")  # the kinds that take =VALUE
HUGE_BYTES = 8 * 1024 * 1024

# Accepted spellings of a scope -> the command key npusmi.py assigns.
_SCOPE_ALIASES = {
    "table": "info",
    "overview": "info",
    "-m": "m",
    "map": "m",
    "-l": "l",
    "list": "l",
    "v": "version",
    "-v": "version",
}


class Fault(Record):
    kind: str
    value: float | None = None
    scope: str | None = None
    npu: int | None = None  # only calls with `-i NPU` (a scope like usages@3)

    def applies_to(self, key: str, npu: int | None = None) -> bool:
        return (self.scope is None or self.scope == key) and (self.npu is None or self.npu == npu)

    @property
    def dcmi_code(self) -> int | None:
        return -int(self.kind.split("-")[1]) if self.kind.startswith("error-") else None


def parse_faults(spec: str | None) -> tuple[Fault, ...]:
    """Parse a fault spec; raises ValueError naming the bad entry."""
    faults = []
    for item, scope, kind, value in parse_entries(spec, FAULT_KINDS, VALUED):
        scope, at, card = scope.partition("@")
        if at and not (card.isascii() and card.isdigit()):
            raise ValueError(f"fault {item!r}: {card!r} is not an NPU id (scope COMMAND@NPU, e.g. usages@3)")
        faults.append(Fault(kind, value, _SCOPE_ALIASES.get(scope, scope) or None, int(card) if at else None))
    return tuple(faults)


def parse_entries(spec: str | None, kinds: tuple[str, ...], valued: tuple[str, ...]) -> list[tuple[str, str, str, float | None]]:
    """(entry, scope, kind, value) of each ``[scope:]kind[=value]`` of a comma-separated spec,
    for either tool's kinds (``valued``: the kinds that take a value); ValueError naming a bad
    entry. Values are finite: they end up in time.sleep and exit codes."""
    entries = []
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        scope, _, body = item.rpartition(":")
        kind, _, raw = body.partition("=")
        if kind not in kinds:
            raise ValueError(f"unknown fault {kind!r} in {item!r}; kinds: {', '.join(kinds)}")
        needs_value = kind in valued
        if needs_value != bool(raw):
            raise ValueError(f"fault {item!r}: {'/'.join(valued) + ' take =VALUE' if needs_value else 'takes no value'}")
        try:
            value = float(raw) if raw else None
        except ValueError:
            raise ValueError(f"fault {item!r}: {raw!r} is not a number") from None
        if value is not None and not math.isfinite(value):
            raise ValueError(f"fault {item!r}: {raw!r} is not a finite number")
        entries.append((item, scope, kind, value))
    return entries


def first(faults: tuple[Fault, ...], kind: str) -> Fault | None:
    return next((f for f in faults if f.kind == kind), None)


def value_of(faults: tuple[Fault, ...], kind: str) -> float | None:
    """The value of the first fault of ``kind`` (slow=S, exit=CODE), None without one."""
    fault = first(faults, kind)
    return None if fault is None else fault.value


def delay(faults: tuple[Fault, ...]) -> None:
    """Faults that only hold the answer back: hang (for good) and slow=SECONDS."""
    if first(faults, "hang"):
        hang_forever()
    slow = value_of(faults, "slow")
    if slow:
        time.sleep(slow)


def exit_code(code: int, faults: tuple[Fault, ...]) -> int:
    """The tool's exit status, or the one an exit=CODE fault forces after the normal output."""
    forced = value_of(faults, "exit")
    return code if forced is None else int(forced)


def clock_offset(faults: tuple[Fault, ...]) -> float:
    """Seconds the simulated npu-smi clock is shifted by (`clock=S` faults add up)."""
    return sum(f.value or 0.0 for f in faults if f.kind == "clock")


def is_flap_down(t: float) -> bool:
    """Odd minutes of the clock: the flapping NPU is absent."""
    return int(t // 60) % 2 == 1


def hang_forever() -> None:
    """Block like a wedged npu-smi: a child holds stdout open, so killing only us is not enough."""
    import shutil  # here, not at the top: every simulated call imports this module
    import subprocess

    sleeper = shutil.which("sleep")
    argv = [sleeper, "1000000"] if sleeper else [sys.executable, "-c", "import time; time.sleep(1e6)"]
    subprocess.Popen(argv, stdin=subprocess.DEVNULL)  # stdout/stderr inherited on purpose
    while True:
        time.sleep(3600)


def garbage(seed: int, t: float) -> bytes:
    """A few KiB of printable noise, stray table borders and invalid UTF-8."""
    import random

    rng = random.Random(f"{seed}:{int(t)}:garbage")
    pieces = []
    for _ in range(64):
        choice = rng.random()
        if choice < 0.4:
            pieces.append(bytes(rng.randrange(256) for _ in range(rng.randrange(8, 64))))
        elif choice < 0.7:
            pieces.append("".join(rng.choice("|+=-: 0123456789abcdefNPU\t") for _ in range(40)).encode() + b"\n")
        else:
            pieces.append(b"\xff\xfe\x00" + rng.randbytes(16) + b"\n")
    return b"".join(pieces)


def truncate(data: bytes) -> bytes:
    """Cut inside a line (never on a newline), as a killed or crashed npu-smi leaves it."""
    cut = max(1, int(len(data) * 0.6))
    while cut < len(data) and data[cut - 1 : cut] == b"\n":
        cut += 1
    return data[:cut]


def huge(data: bytes) -> bytes:
    if not data:
        return data
    return data * (HUGE_BYTES // len(data) + 1)
