"""Shared fixtures for the simulator tests."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "npu-smi"


@pytest.fixture
def fixture_text():
    """Read a copied npu-smi fixture byte for byte (bytes, so no newline translation)."""

    def read(name: str) -> str:
        return (FIXTURES / f"{name}.txt").read_bytes().decode("utf-8")

    return read
