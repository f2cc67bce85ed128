"""Structured logs: logfmt and JSON carry the `extra=` fields; values are quoted when needed."""

from __future__ import annotations

import io
import json
import logging
import tracemalloc

import exporter.core.health as health_module
from exporter.core.health import (
    MAX_LOGGED_PER_RUN,
    MAX_REMEMBERED_SUBJECTS,
    Failure,
    SourceHealth,
)
from exporter.core.logs import setup_logging


def capture(fmt: str) -> io.StringIO:
    stream = io.StringIO()
    setup_logging(fmt, "info", stream=stream)
    return stream


def test_logfmt_quotes_values_with_spaces():
    stream = capture("logfmt")
    logging.getLogger("exporter.test").warning("source failing", extra={"source": "npu_smi_info", "error": 'said "no" twice'})
    line = stream.getvalue().strip()
    assert "level=warning" in line and "logger=exporter.test" in line
    assert 'msg="source failing"' in line and "source=npu_smi_info" in line
    assert 'error="said \\"no\\" twice"' in line


def test_json_lines():
    stream = capture("json")
    logging.getLogger("exporter.test").info("listening", extra={"address": ":9435"})
    record = json.loads(stream.getvalue())
    assert record["msg"] == "listening" and record["address"] == ":9435" and record["level"] == "info"


def test_a_failure_is_logged_once_per_state_change():
    stream = capture("logfmt")
    health = SourceHealth("npu_smi_info")
    timeout = Failure("info", "timeout", "did not finish")
    for _ in range(5):
        health.record(1.0, [timeout], ["info"])
    health.record(1.0, [Failure("info", "garbled", "no table")], ["info"])
    health.record(0.1, [], ["info"])
    health.record(0.1, [], ["info"])
    text = stream.getvalue()
    assert text.count("reason=timeout") == 1
    assert text.count("reason=garbled") == 1
    assert text.count("source recovered") == 1
    status = health.status()
    assert status.errors == {"timeout": 5, "garbled": 1}
    assert status.success and status.runs == 8


def test_what_is_remembered_of_failing_subjects_stays_bounded():
    """Subjects can be paths a training job creates without end: a flood of new failing ones
    never grows what health keeps past MAX_REMEMBERED_SUBJECTS, and a subject failing all along
    is still logged once."""
    stream = capture("logfmt")
    health = SourceHealth("profiles")
    flood = 3 * MAX_REMEMBERED_SUBJECTS

    def held_by_health(snapshot: tracemalloc.Snapshot) -> int:
        only = snapshot.filter_traces([tracemalloc.Filter(True, health_module.__file__)])
        return sum(stat.size for stat in only.statistics("filename"))

    tracemalloc.start()
    try:
        for i in range(flood):
            health.record(
                0.1,
                [
                    Failure("/watched", "too_many_entries", "stopped"),
                    Failure(f"/watched/job/export_{i:06d}_ascend_pt", "no_data", "nothing usable"),
                ],
                ["/watched"],
            )
            if i == MAX_REMEMBERED_SUBJECTS:
                before = held_by_health(tracemalloc.take_snapshot())
        grown = held_by_health(tracemalloc.take_snapshot()) - before
    finally:
        tracemalloc.stop()
    text = stream.getvalue()
    assert text.count("reason=too_many_entries") == 1 and text.count("reason=no_data") == flood
    assert grown < 16 * 1024  # 2,000 more subjects would hold about 100 KiB
    assert health.status().errors == {"too_many_entries": flood, "no_data": flood}


def test_one_run_with_many_new_failing_subjects_logs_a_few_and_a_count():
    """50,000 symlinks out of a watched directory fail in one scan: ten lines and one count,
    not a line each; their recovery likewise."""
    stream = capture("logfmt")
    health = SourceHealth("profiles")
    links = [f"/watched/link_{i:05d}" for i in range(50_000)]
    health.record(0.1, [Failure(link, "outside_root", "resolves outside /watched") for link in links], links)
    lines = stream.getvalue().splitlines()
    assert sum('msg="source failing"' in line for line in lines) == MAX_LOGGED_PER_RUN
    (more,) = [line for line in lines if "more subjects" in line]
    assert f"subjects={50_000 - MAX_LOGGED_PER_RUN}" in more and "reasons=outside_root" in more
    assert health.status().errors == {"outside_root": 50_000} and len(health.status().failing) == 50_000
    health.record(0.1, [], links)
    recovered = [line for line in stream.getvalue().splitlines() if "recovered" in line]
    assert len(recovered) == MAX_LOGGED_PER_RUN + 1 and recovered[-1].count("more subjects") == 1
