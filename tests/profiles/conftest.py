"""Profile export fixtures (tests/support/profile_exports.py builds them from the real samples)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.profile_exports import CLUSTER, MSPROF, PT_LEVEL0, PT_LEVEL1, build


@pytest.fixture
def pt_level1(tmp_path: Path) -> Path:
    return build(tmp_path / "resnet" / "host_1234_20250109_ascend_pt", PT_LEVEL1)


@pytest.fixture
def pt_level0(tmp_path: Path) -> Path:
    return build(tmp_path / "resnet" / "host_1234_20250109_ascend_pt", PT_LEVEL0)


@pytest.fixture
def msprof_profile(tmp_path: Path) -> Path:
    return build(tmp_path / "tilelang" / "PROF_000001_20260605161708478_FRJKORBPFMHQMGLA", MSPROF)


@pytest.fixture
def cluster_output(tmp_path: Path) -> Path:
    return build(tmp_path / "llm" / "cluster_analysis_output", CLUSTER)
