"""Fixtures: a short socket directory and a fake kubelet (tests/podresources/kubelet_fake.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kubelet import FakeKubelet


@pytest.fixture
def sock_dir(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, unless its socket path would pass the 107-byte sun_path limit."""
    if len(str(tmp_path / "kubelet.sock")) < 100:
        yield tmp_path
        return
    short = Path(tempfile.mkdtemp(prefix="klt", dir="/tmp"))
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir: Path) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(sock_dir / "kubelet.sock")
    try:
        yield fake
    finally:
        fake.stop()
