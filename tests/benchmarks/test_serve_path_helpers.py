"""The helpers of the serve-path benchmarks (exporter_scrape_a3, exporter_scaling, exporter_abuse):
fair scrape order, the static-bytes server, the raw HTTP client, change detection, the report."""

from __future__ import annotations

import asyncio
import gzip
from collections import Counter

from benchmarks import _common as c
from benchmarks.__main__ import section
from benchmarks._rawhttp import read_response, request_bytes
from benchmarks.exporter_scaling import Sampled, _before_jobs


def test_every_target_takes_every_place_equally_often():
    for names in (["a", "b"], ["a", "b", "c"]):
        n = len(names)
        places = Counter((name, orders.index(name)) for i in range(2 * n) for orders in [c.scrape_orders(names, i)] for name in names)
        assert set(places.values()) == {2}, places
        assert all(sorted(c.scrape_orders(names, i)) == sorted(names) for i in range(10))


def test_the_static_server_serves_the_captured_bytes_and_headers_only_for_their_request_headers():
    body = gzip.compress(b"# HELP x y\nx 1\n# EOF\n")
    response_headers = {
        "content-type": "application/openmetrics-text; version=1.0.0; charset=utf-8",
        "content-encoding": "gzip",
        "date": "dropped",
        "content-length": "999",
    }
    with c.static_server({"prometheus": (c.PROMETHEUS_HEADERS, response_headers, body)}) as port:
        client = c.Client(port)
        try:
            status, headers, got, _ = client.get("/metrics", c.PROMETHEUS_HEADERS)
            assert (status, got) == (200, body)
            assert headers["content-type"] == response_headers["content-type"]
            assert headers["content-encoding"] == "gzip" and headers["content-length"] == str(len(body))
            assert client.get("/metrics", c.PLAIN_HEADERS)[0] == 404
        finally:
            client.close()


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    async def go() -> tuple[int, dict[str, str], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_response(reader)

    return asyncio.run(go())


def test_raw_responses_are_read_to_their_last_byte():
    assert _parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT") == (200, {"content-length": "5"}, b"hello")
    status, _, body = _parse(b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    assert (status, body) == (401, b"abcde")
    assert _parse(b"HTTP/1.1 503 Busy\r\nConnection: close\r\n\r\nbye") == (503, {"connection": "close"}, b"bye")
    assert request_bytes("POST", "/p", {"A": "b"}, b"xy").endswith(b"A: b\r\nContent-Length: 2\r\n\r\nxy")


def test_a_change_before_the_jobs_part_is_told_from_a_change_in_it():
    def body(runs: int, chip: str, jobs: str) -> bytes:
        return (
            f'npu_chip {chip}\ncann_exporter_source_runs_total{{source="npu_smi_info"}} {runs}.0\n'
            f'# HELP npu_job_info x\nnpu_job_info{{job_name="{jobs}"}} 1\n'
        ).encode()

    for mode, wrap in (("plain", lambda b: b), ("prometheus", gzip.compress)):
        sampled = Sampled()
        assert sampled.classify(mode, wrap(body(1, "1", "a"))) == (False, False)  # the first sets the reference
        assert sampled.classify(mode, wrap(body(1, "1", "b"))) == (False, False)  # jobs only
        assert sampled.classify(mode, wrap(body(1, "2", "b"))) == (True, False)  # a sampled part, not the chips' run
        assert sampled.classify(mode, wrap(body(2, "3", "b"))) == (True, True)  # npu-smi info ran
    assert _before_jobs(gzip.compress(b"a" * 600_000 + b"\n# HELP npu_job_x\n"), gzipped=True) == b"a" * 600_000


def test_a_module_may_have_a_section_heading_of_its_own():
    record = {"status": "ok", "seconds": 1.0, "result": {"title": "flooded", "section": "Under abuse", "figures": []}}
    lines = section("exporter_abuse", record)
    assert lines[:3] == ["## Under abuse", "", "`exporter_abuse`: flooded"]
    assert section("x", {"status": "ok", "result": {"title": "t"}})[0] == "## x: t"
