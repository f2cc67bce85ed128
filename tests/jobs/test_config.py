"""Ingest options, the token file, assembly and the OpenAPI document agree with the code."""

from __future__ import annotations

import json

import pytest
import yaml

from exporter.app.settings import build_settings, load_ingest_token
from exporter.core.options import ConfigError
from exporter.hooks import PHASES
from exporter.jobs.collector import JobCollector
from exporter.jobs.http import OPENAPI_PATH
from exporter.jobs.metrics import INGEST_REJECT_REASONS, SERIES_PER_RANK
from exporter.jobs.options import INGEST_OPTIONS
from exporter.jobs.phases import STAGES, VOCABULARY
from exporter.jobs.store import IngestStore
from exporter.jobs.validate import IngestError, IngestLimits, parse_batch
from exporter.node.assembly import assemble
from exporter.web.bodies import ERROR_REASONS as BODY_REFUSALS
from tests.support.paths import ROOT


def test_defaults():
    s = build_settings()
    assert s[INGEST_OPTIONS].enabled and s[INGEST_OPTIONS].token is None
    assert (s[INGEST_OPTIONS].ttl, s[INGEST_OPTIONS].finished_ttl) == (1800, 60)
    assert (s[INGEST_OPTIONS].max_jobs, s[INGEST_OPTIONS].max_ranks, s[INGEST_OPTIONS].max_body_bytes) == (8, 16, 1 << 20)
    assert (s[INGEST_OPTIONS].max_series, s[INGEST_OPTIONS].max_jobs_per_client, s[INGEST_OPTIONS].max_ranks_per_client) == (
        64 * SERIES_PER_RANK,
        4,
        32,
    )
    assert s[INGEST_OPTIONS].idle_after == 300
    assert IngestLimits() == IngestLimits.of(s[INGEST_OPTIONS])  # one set of defaults: the options'


def test_options_from_env_and_flags():
    s = build_settings(
        env={"CANN_EXPORTER_INGEST_TTL": "5m", "CANN_EXPORTER_INGEST_TOKEN": "t0k"},
        flags={"ingest.max_jobs": "8", "ingest.enabled": False},
    )
    assert (s[INGEST_OPTIONS].ttl, s[INGEST_OPTIONS].token, s[INGEST_OPTIONS].max_jobs, s[INGEST_OPTIONS].enabled) == (300, "t0k", 8, False)


def test_bad_values_are_named():
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"ingest.ttl": "forever", "ingest.max_ranks": "0", "ingest.token": "a", "ingest.token_file": "/x"})
    text = "\n".join(info.value.problems)
    assert "--ingest.ttl" in text and "--ingest.max-ranks" in text


def test_token_and_token_file_are_exclusive():
    with pytest.raises(ConfigError) as info:
        build_settings(flags={"ingest.token": "a", "ingest.token_file": "/x"})
    assert "not both" in info.value.problems[0]


def test_token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    s = load_ingest_token(build_settings(flags={"ingest.token_file": str(path)}))
    assert s[INGEST_OPTIONS].token == "s3cret"
    with pytest.raises(ConfigError, match="ingest.token_file: .*missing: not found"):
        load_ingest_token(build_settings(flags={"ingest.token_file": str(tmp_path / "missing")}))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        load_ingest_token(build_settings(flags={"ingest.token_file": str(tmp_path / "empty")}))


def test_assembly_builds_the_store_and_registers_the_collector():
    settings = build_settings(
        flags={
            "simulator.scenario": "healthy",
            "ingest.max_jobs": "3",
            "ingest.ttl": "2m",
            "ingest.token": "t",
            "ingest.max_series": "700",
            "ingest.max_jobs_per_client": "2",
            "ingest.max_ranks_per_client": "5",
            "ingest.idle_after": "90s",
        }
    )
    store = assemble(settings).source(IngestStore)
    assert store is not None and settings[INGEST_OPTIONS].token == "t"
    assert store.limits.max_jobs == 3 and store.ttl == 120
    limits = store.limits
    assert (limits.max_series, limits.max_jobs_per_client, limits.max_ranks_per_client, limits.idle_after) == (700, 2, 5, 90)
    assert any(isinstance(r.collector, JobCollector) for r in assemble(settings).exposition.renderings)
    assert assemble(settings, ingest=False).source(IngestStore) is None
    assert assemble(build_settings(flags={"simulator.scenario": "healthy", "ingest.enabled": False})).source(IngestStore) is None


def test_the_hooks_stage_list_is_the_ingests():
    assert PHASES == STAGES


def test_openapi_document_matches_the_validator():
    doc = yaml.safe_load(OPENAPI_PATH.read_text())
    assert doc["openapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    phases = schemas["Step"]["properties"]["phases"]
    assert phases["additionalProperties"] == {"$ref": "#/components/schemas/Seconds"}
    assert all(stage in phases["description"] for stage in STAGES)
    assert {"forward", "backward", "optimizer", "all_reduce", "dataloader", "checkpoint"} <= set(VOCABULARY)
    # The ingest's refusals and the web front's refusals of a body (bad_request is HTTP-level: no JSON)
    body_reasons = {reason for reason in BODY_REFUSALS if reason != "bad_request"}
    assert set(schemas["Error"]["properties"]["reason"]["enum"]) == set(INGEST_REJECT_REASONS) | body_reasons
    assert schemas["Batch"]["properties"]["steps"]["maxItems"] == IngestLimits().max_steps
    post = doc["paths"]["/api/v1/steps"]["post"]
    assert {"200", "400", "401", "409", "413", "415", "429"} <= set(post["responses"])
    # The documented example is itself a valid batch.
    example = post["requestBody"]["content"]["application/json"]["example"]
    end = example["steps"][0]["end"]
    batch = parse_batch(json.dumps(example).encode(), IngestLimits(), now=end + 1)
    assert batch.job_name == example["job_name"]
    # and every field the validator knows is documented
    with pytest.raises(IngestError):
        parse_batch(json.dumps({**example, "undocumented": 1}).encode(), IngestLimits(), now=end + 1)
    assert set(schemas["Batch"]["properties"]) == {
        "job_name",
        "rank",
        "world_size",
        "device",
        "framework",
        "pid",
        "session",
        "profiling_seconds",
        "dropped",
        "final",
        "memory",
        "steps",
        "precision",
        "started",
        "proc",
        "outside",
    }
    assert set(schemas["Step"]["properties"]) == {"duration", "end", "samples", "flops", "phases", "index"}


def test_openapi_is_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "jobs/*.yaml" in pyproject["tool"]["setuptools"]["package-data"]["exporter"]


def test_serve_with_an_unreadable_token_file_exits_2(tmp_path, capsys):
    from exporter.cli import main

    assert main(["serve", "--ingest.token-file", str(tmp_path / "missing")]) == 2
    assert "ingest.token_file" in capsys.readouterr().err


def test_the_documented_limits_and_arithmetic_are_the_code_s():
    from exporter.app.settings import OPTIONS_BY_KEY
    from exporter.jobs.metrics import SERIES_PER_RANK

    text = " ".join((ROOT / "docs" / "training-hooks.md").read_text().split())  # re-wrapping is fine
    for key in ("max_jobs", "max_ranks", "max_series", "max_jobs_per_client", "max_ranks_per_client", "idle_after"):
        assert f"| `ingest.{key}` | {OPTIONS_BY_KEY['ingest.' + key].shown_default} |" in text, key
    limits = IngestLimits()
    ranks = limits.max_series // SERIES_PER_RANK
    assert f"**{SERIES_PER_RANK} series**" in text
    assert f"({limits.max_series:,} = {ranks} ranks)" in text
    assert f"{limits.max_jobs} x {limits.max_ranks} x {SERIES_PER_RANK} = {limits.max_jobs * limits.max_ranks * SERIES_PER_RANK:,}" in text
    assert f"({limits.max_jobs_per_client} of the {limits.max_jobs} jobs, {limits.max_ranks_per_client} of the {ranks} ranks)" in text
