"""Shared fixtures for the simulator tests."""

from __future__ import annotations

import pytest

from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES


@pytest.fixture
def fixture_text():
    """Read a copied npu-smi fixture byte for byte (bytes, so no newline translation)."""

    def read(name: str) -> str:
        return (FIXTURES / f"{name}.txt").read_bytes().decode("utf-8")

    return read
