"""schemathesis against exporter/jobs/openapi.yaml, served by a real `cann-exporter serve` on
127.0.0.1: schema-valid and schema-invalid requests, bounded in number; every answer must be
one the document describes (status, content type, body schema) and never a server error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from exporter.jobs.http import OPENAPI_PATH
from tests.support.ports import free_port

pytestmark = pytest.mark.e2e

TOKEN = "fuzz-token"
schema = schemathesis.openapi.from_path(OPENAPI_PATH)
schema.config.generation.update(max_examples=100, deterministic=True)
# Invalid data may be refused for its size before its fields are read: 413 is a rejection too.
_rejection = schema.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413"]


@pytest.fixture(scope="module")
def exporter_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = open(tmp_path_factory.mktemp("schemathesis") / "exporter.log", "w")
    env = {**os.environ, "CANN_EXPORTER_INGEST_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--simulate",
            "idle",
            "--npu-smi.details=",
            "--ingest.max-jobs",
            "1000",
            # schemathesis opens a connection per request, faster than the per-address bound a client
            # gets by default (the bound has its own tests in tests/web/test_hostile_front.py)
            "--web.new-connections-per-second",
            "100000",
            "--web.new-connections-burst",
            "100000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 30
        while True:
            assert proc.poll() is None and time.monotonic() < end, "exporter did not start"
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_ingest_api_conforms_to_its_openapi_document(case, exporter_url):
    # Schema-valid data may still be refused: rank < world_size, `end` within the last day and
    # the cardinality limits are rules the document states in prose but JSON Schema cannot.
    case.call_and_validate(base_url=exporter_url, headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=[positive_data_acceptance])


def test_regression_nulls_the_validator_accepts_are_in_the_document():
    """Found by schemathesis: `end`, `samples`, `phases` and memory fields may be null (absent),
    as the validator has always accepted; the document said they may not."""
    import yaml

    from exporter.jobs.validate import IngestLimits, parse_batch

    body = b'{"job_name": "j", "rank": 0, "memory": {"allocated_bytes": null}, "steps": [{"duration": 0.1, "end": null, "samples": null, "phases": null}]}'
    assert parse_batch(body, IngestLimits(), time.time()).steps[0].end is None
    props = yaml.safe_load(OPENAPI_PATH.read_text())["components"]["schemas"]
    assert all(props["Step"]["properties"][k]["nullable"] for k in ("end", "samples", "phases"))
    assert props["Batch"]["properties"]["memory"]["properties"]["allocated_bytes"]["nullable"]
