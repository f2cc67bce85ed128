"""`ingest.*`: the training-hook ingest (POST /api/v1/steps) and its bounds.

The bounds are sized for one node, so that whoever can reach the port cannot make /metrics
large: a rank has at most SERIES_PER_RANK series (81), a node at most 16 NPU dies, and the
series budget caps the whole store whatever the job and rank limits allow. The arithmetic is
in docs/training-hooks.md ("Limits and admission").
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.core.options import (
    option,
    optional_text,
    parse_bool,
    parse_duration,
    parse_positive_int,
)
from exporter.core.registration import Section
from exporter.jobs.metrics import SERIES_PER_RANK

# Defaults the help texts compute with (each still written once).
_JOBS, _RANKS = 8, 16
_SERIES = 64 * SERIES_PER_RANK  # 64 ranks: 4 nodes' worth of dies, or 8 jobs of 8


@dataclass(frozen=True)
class IngestOptions:
    enabled: bool = option(True, parse_bool, "accept training-hook steps on POST /api/v1/steps (npu_job_* metrics)")
    token: str | None = option(
        None,
        optional_text,
        "bearer token the hooks must send (prefer ingest.token_file or the environment: flags show in ps)",
        metavar="TOKEN",
    )
    token_file: str | None = option(None, optional_text, "file holding the bearer token (e.g. a mounted Kubernetes secret)", metavar="PATH")
    ttl: float = option(
        "30m",
        parse_duration,
        "a job rank that stops reporting is dropped after this (keep it above the stall alert window)",
        metavar="DURATION",
    )
    finished_ttl: float = option(
        "60s",
        parse_duration,
        "a job rank whose hook closed (npu_job_state finished) is dropped after this, with its posted profile summaries",
        metavar="DURATION",
    )
    stalled_after: float = option(
        "2m",
        parse_duration,
        "a job rank whose hook sent nothing for this long, not even a heartbeat (every 30s), and never closed is "
        "served as npu_job_state stalled (crashed or hung) until ingest.ttl",
        metavar="DURATION",
    )
    max_jobs: int = option(
        _JOBS,
        parse_positive_int,
        f"distinct job_name values held at once ({_JOBS} x {_RANKS} ranks x {SERIES_PER_RANK} would be "
        f"{_JOBS * _RANKS * SERIES_PER_RANK:,} series; ingest.max_series bounds the total); "
        "more are rejected (429) unless an idle job gives way",
        metavar="N",
    )
    max_ranks: int = option(
        _RANKS, parse_positive_int, "ranks held per job: a node has at most 16 NPU dies (Atlas A3); more are rejected (429)", metavar="N"
    )
    max_series: int = option(
        _SERIES,
        parse_positive_int,
        f"npu_job_* series the ingest may serve, {SERIES_PER_RANK} reserved per rank when it is admitted (every phase, "
        f"every bucket): {_SERIES:,} = {_SERIES // SERIES_PER_RANK} ranks, at most about 1.1 MB of exposition; beyond, 429 "
        "unless idle ranks give way",
        metavar="N",
    )
    max_jobs_per_client: int = option(
        4,
        parse_positive_int,
        "jobs one client address may hold ranks of (loopback, the node's own processes, is not limited); more are rejected (429)",
        metavar="N",
    )
    max_ranks_per_client: int = option(
        32,
        parse_positive_int,
        "ranks one client address may hold, half the default series budget (loopback is not limited); more are rejected (429)",
        metavar="N",
    )
    idle_after: float = option(
        "5m",
        parse_duration,
        "a rank with no step for this long (or none yet, or closed) gives way when a rank that reports steps needs its place",
        metavar="DURATION",
    )
    max_body_bytes: int = option(1 << 20, parse_positive_int, "larger POST bodies are rejected (413)", metavar="BYTES")


INGEST_OPTIONS = Section("ingest", IngestOptions, serve_only=True)
