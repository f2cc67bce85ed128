"""`ingest.*`: the training-hook ingest (POST /api/v1/steps) and its bounds."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import (
    option,
    optional_text,
    parse_bool,
    parse_duration,
    parse_positive_int,
)


@dataclass(frozen=True)
class IngestOptions:
    enabled: bool = option(True, parse_bool, "accept training-hook steps on POST /api/v1/steps (npu_job_* metrics)")
    token: str | None = option(
        None, optional_text, "bearer token the hooks must send (prefer ingest.token_file or the environment: flags show in ps)",
        metavar="TOKEN")
    token_file: str | None = option(None, optional_text, "file holding the bearer token (e.g. a mounted Kubernetes secret)", metavar="PATH")
    ttl: float = option(
        "30m", parse_duration, "a job rank that stops reporting is dropped after this (keep it above the stall alert window)",
        metavar="DURATION")
    finished_ttl: float = option("60s", parse_duration, "a job rank whose hook closed is dropped after this", metavar="DURATION")
    max_jobs: int = option(64, parse_positive_int, "distinct job_name values held at once; more are rejected (429)", metavar="N")
    max_ranks: int = option(32, parse_positive_int, "ranks held per job; more are rejected (429)", metavar="N")
    max_body_bytes: int = option(1 << 20, parse_positive_int, "larger POST bodies are rejected (413)", metavar="BYTES")
