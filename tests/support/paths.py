"""Where things are: the repository, the copied real outputs (tests/fixtures, each with a .src
file naming its public origin) and the golden expositions."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
NPU_SMI_FIXTURES = FIXTURES / "npu-smi"
HCCN_FIXTURES = FIXTURES / "hccn"
PROFILING_FIXTURES = FIXTURES / "profiling"
GOLDEN = ROOT / "tests" / "golden"
