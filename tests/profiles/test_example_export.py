"""examples/profile-export: the small real torch_npu export shipped to try `--profile-dir` on.
Its files are the real samples byte for byte, and both `diagnose` and `serve` read it."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

from exporter.cli import main
from tests.support.paths import ROOT
from tests.support.profile_exports import FIXTURES, PT_LEVEL1

EXAMPLE = ROOT / "examples" / "profile-export"
EXPORT = EXAMPLE / "rank0_ascend_pt"


def test_the_example_is_the_real_samples_byte_for_byte():
    for relative, sample in PT_LEVEL1.items():
        assert (EXPORT / relative).read_bytes() == (FIXTURES / sample).read_bytes(), relative
        assert (FIXTURES / f"{sample}.src").read_text().strip() in (EXAMPLE / "PROVENANCE.md").read_text()
    assert (EXPORT / "ASCEND_PROFILER_OUTPUT" / "analyse.done").exists()


def test_diagnose_reads_it():
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["diagnose", "--profile-dir", str(EXAMPLE)])
    text = out.getvalue()
    assert code == 1 and "verdict: ABNORMAL" in text  # compute share 6.5%: below the 60% bound
    assert "operator #1 Conv2D" in text and "profile of job profile-export rank 0" in text


def test_serve_reads_it(start):
    # No per-card detail calls: the profile source's first run waits for the npu-smi rounds before it.
    exporter = start(
        "--simulate",
        "--no-hccn.enabled",
        "--npu-smi.details=",
        "--no-collector.pods",
        "--profile-dir",
        str(EXAMPLE),
        "--profiles.interval",
        "1s",
    )
    found = exporter.wait_for(lambda samples: any(name.startswith("npu_profile_") for name, _ in samples))
    assert any(name.startswith("npu_profile_") and ("job_name", "profile-export") in labels for name, labels in found)
