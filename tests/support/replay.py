"""A replaying npu-smi built from real fixtures: a /bin/sh stand-in that prints them."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import NPU_SMI_FIXTURES

Reply = "str | Path | tuple[str | Path, int]"  # fixture name or file, or (that, exit status)
CALLS = "npu-smi.calls"


def write_replay_npu_smi(directory: Path, replies: Mapping[str, object], default_exit: int = 1) -> Path:
    """A /bin/sh stand-in for npu-smi that prints a real fixture per command line.

    ``replies`` maps the argument string (e.g. "info -m", "info -t usages -i 0") to a
    fixture name (printed, exit 0) or (fixture name, exit status); a Path instead of a name is
    printed as it is (a fixture a test has cut, say). A glob such as
    "info -t usages -i *" is allowed. Anything else prints npu-smi's own bad-type text.
    Every call's arguments are appended to ``<directory>/npu-smi.calls`` (see :func:`calls`).
    """
    lines = ["#!/bin/sh", f'echo "$*" >> {shlex.quote(str(directory / CALLS))}', 'case "$*" in']
    for args, reply in replies.items():
        name, status = reply if isinstance(reply, tuple) else (reply, 0)
        path = name if isinstance(name, Path) else NPU_SMI_FIXTURES / f"{name}.txt"
        assert path.exists(), path
        pattern = "*".join(shlex.quote(piece) if piece else "" for piece in args.split("*"))
        lines.append(f"  {pattern}) cat {shlex.quote(str(path))}; exit {status} ;;")
    lines.append(f"  *) echo 'Error parameter of -t'; exit {default_exit} ;;")
    lines.append("esac")
    script = directory / "npu-smi"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def calls(directory: Path) -> list[str]:
    """The argument strings the replaying npu-smi in ``directory`` was called with, in order."""
    path = directory / CALLS
    return path.read_text().splitlines() if path.exists() else []
