"""Helpers for the hccn_tool tests (importable by the tests): copied samples, a replaying hccn_tool."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import HCCN_FIXTURES

FIXTURES = HCCN_FIXTURES


def fixture(name: str) -> str:
    """A copied hccn_tool sample (bytes decoded as is: no newline translation)."""
    return (FIXTURES / f"{name}.txt").read_bytes().decode("utf-8")


def write_replay_hccn(directory: Path, replies: Mapping[str, object], default: str = "unknown", name: str = "hccn_tool") -> Path:
    """A /bin/sh stand-in for hccn_tool.

    ``replies`` maps an argument string (globs allowed, e.g. "-i * -link -g") to a fixture
    name (printed on stdout, exit 0), a tuple (fixture name or None, exit status[, "err"])
    or the word "hang" (a child keeps stdout open and both sleep: only a group kill ends it).
    A fixture name "text:..." prints the literal text instead. Anything else prints
    hccn_tool's unknown-option error on stderr with exit 3. Every call's arguments are
    appended to ``<directory>/calls.log``; a hanging call writes its process group to
    ``<directory>/hang.pgid``.
    """
    log = shlex.quote(str(directory / "calls.log"))
    lines = ["#!/bin/sh", f'echo "$*" >> {log}', 'case "$*" in']
    for args, reply in replies.items():
        pattern = "*".join(shlex.quote(piece) if piece else "" for piece in args.split("*"))
        lines.append(f"  {pattern}) {_action(reply, directory)} ;;")
    lines.append(f"  *) {_action(default, directory)} ;;")
    lines.append("esac")
    script = directory / name
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def _action(reply: object, directory: Path) -> str:
    if reply == "hang":
        pgid = shlex.quote(str(directory / "hang.pgid"))
        return f"ps -o pgid= -p $$ > {pgid}; sleep 1000 & sleep 1000"
    if reply == "unknown":
        return "echo 'Get unknown option!' >&2; exit 3"
    name, status, stream = (reply, 0, "out") if isinstance(reply, str) else (tuple(reply) + ("out",))[:3]
    redirect = " >&2" if stream == "err" else ""
    if name is None:
        return f"exit {status}"
    if name.startswith("text:"):
        return f"printf '%s\\n' {shlex.quote(name[5:])}{redirect}; exit {status}"
    path = FIXTURES / f"{name}.txt"
    assert path.exists(), path
    return f"cat {shlex.quote(str(path))}{redirect}; exit {status}"


def calls(directory: Path) -> list[str]:
    """The argument strings the replaying hccn_tool was called with, in order."""
    path = directory / "calls.log"
    return path.read_text().splitlines() if path.exists() else []
