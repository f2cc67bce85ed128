"""Is the process that holds a rank still alive? What the ingest knows when another process
claims the rank: a restart takes over at once once the holder is known dead, two live
processes are never summed.

Two signs, either enough:

- its pid, read in /proc (under a root the tests point at a fixture tree): the hooks send
  ``proc``, ``<boot id>:<pid namespace inode>:<start time in clock ticks>``. Only when the boot id
  and the pid namespace are this exporter's does a pid here name the same process; then a pid
  that is gone, a zombie, or another process (another start time) is a dead holder, and a pid
  with that start time a live one (refused, whatever its connection says);
- its keep-alive connection closed without a final report, and nothing heard from it since for
  :data:`CLOSED_QUIET` seconds (a live hook whose connection broke reconnects within its flush
  interval). Used where /proc cannot tell (another node, another pid namespace, an old hook).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

CLOSED_QUIET = 5.0  # seconds without a batch after its connection closed before a holder counts as dead
PROC = re.compile(r"[0-9a-f-]{1,36}:[0-9]{1,20}:[0-9]{1,20}")  # the hooks' `proc`
_NS = re.compile(r"pid:\[([0-9]+)\]")
_MAX_STAT = 4096


class Connection(Protocol):
    """What the ingest keeps of the connection a holder's latest batch came on (an asyncio transport)."""

    def is_closing(self) -> bool: ...


class ProcTable:
    """The processes of this node as this exporter's /proc shows them."""

    def __init__(self, root: Path = Path("/")) -> None:
        self.root = root
        self._here: tuple[str, str] | None = None  # (boot id, pid namespace) once read
        self._read = False

    def here(self) -> tuple[str, str] | None:
        """This exporter's boot id and pid namespace inode, read once (None: no /proc to read)."""
        if not self._read:
            self._read = True
            try:
                boot = (self.root / "proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
                found = _NS.fullmatch(os.readlink(self.root / "proc/self/ns/pid"))
                self._here = (boot, found.group(1)) if boot and found else None
            except (OSError, ValueError):
                self._here = None
        return self._here

    def alive(self, pid: str, proc: str) -> bool | None:
        """Whether process ``pid`` (its hook's ``proc``) lives: None when this /proc cannot tell."""
        if not pid or not proc or not PROC.fullmatch(proc):
            return None
        boot, namespace, ticks = proc.split(":")
        if self.here() != (boot, namespace):
            return None
        try:
            with open(self.root / "proc" / pid / "stat", "rb") as fh:
                stat = fh.read(_MAX_STAT).decode("ascii", "replace")
        except FileNotFoundError:
            return False
        except OSError:  # permission, or a pid without a directory: cannot tell
            return None
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 20:
            return None
        state, started = fields[0], fields[19]  # stat fields 3 and 22
        return state not in ("Z", "X", "x") and started == ticks
