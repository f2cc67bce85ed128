"""A short directory for unix sockets (sun_path holds 107 bytes; tmp_path may be longer)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sock_dir(tmp_path: Path) -> Iterator[Path]:
    if len(str(tmp_path / "docker.sock")) < 100:
        yield tmp_path
        return
    short = Path(tempfile.mkdtemp(prefix="own", dir="/tmp"))
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)
