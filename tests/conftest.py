"""Shared test helpers: a replaying npu-smi built from real fixtures, free ports."""

from __future__ import annotations

import logging
import shlex
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NPU_SMI_FIXTURES = ROOT / "tests" / "fixtures" / "npu-smi"

Reply = "str | tuple[str, int]"  # fixture name, or (fixture name, exit status)


def write_replay_npu_smi(directory: Path, replies: Mapping[str, object], default_exit: int = 1) -> Path:
    """A /bin/sh stand-in for npu-smi that prints a real fixture per command line.

    ``replies`` maps the argument string (e.g. "info -m", "info -t usages -i 0") to a
    fixture name (printed, exit 0) or (fixture name, exit status). A glob such as
    "info -t usages -i *" is allowed. Anything else prints npu-smi's own bad-type text.
    """
    lines = ["#!/bin/sh", 'case "$*" in']
    for args, reply in replies.items():
        name, status = reply if isinstance(reply, tuple) else (reply, 0)
        path = NPU_SMI_FIXTURES / f"{name}.txt"
        assert path.exists(), path
        pattern = "*".join(shlex.quote(piece) if piece else "" for piece in args.split("*"))
        lines.append(f"  {pattern}) cat {shlex.quote(str(path))}; exit {status} ;;")
    lines.append(f"  *) echo 'Error parameter of -t'; exit {default_exit} ;;")
    lines.append("esac")
    script = directory / "npu-smi"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


@pytest.fixture(autouse=True)
def _restore_root_logging():
    """In-process CLI runs install the exporter's log handler; drop it after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = [h for h in root.handlers if h in handlers or h.get_name() != "cann-exporter"]
    root.setLevel(level)


@pytest.fixture
def replay_npu_smi(tmp_path: Path) -> Callable[..., Path]:
    def make(replies: Mapping[str, object], default_exit: int = 1) -> Path:
        return write_replay_npu_smi(tmp_path, replies, default_exit)
    return make


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
