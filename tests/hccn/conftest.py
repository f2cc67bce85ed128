"""Fixtures for the hccn_tool tests (helpers live in hccn_helpers.py, importable by the tests)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.support.hccn import write_replay_hccn


@pytest.fixture
def replay_hccn(tmp_path: Path) -> Callable[..., Path]:
    def make(replies: Mapping[str, object], default: str = "unknown") -> Path:
        return write_replay_hccn(tmp_path, replies, default)

    return make
