"""The landing page: every endpoint, the version, each collector on or off, each source's
last success."""

from __future__ import annotations

import re
from types import MappingProxyType

from exporter import __version__
from exporter.core.about import About, CollectorState
from exporter.core.health import SourceStatus
from exporter.web.landing import render


def test_render_escapes_and_says_what_runs():
    about = About(
        collectors=(CollectorState("devices", True, "npu-smi: /opt/<npu>/npu-smi"), CollectorState("pods", False, "collector.pods is off")),
        sources=(
            SourceStatus("npu_smi_info", runs=3, success=True, last_success_timestamp=1_000.0),
            SourceStatus("hccn_link", runs=2, success=False, errors=MappingProxyType({"timeout": 2})),
            SourceStatus("profiles"),
        ),
    )
    page = render("1.2.3", [("GET", "/metrics"), ("POST", "/api/v1/steps")], about, now=1_030.0)
    assert "<h1>cann-exporter 1.2.3</h1>" in page
    assert '<a href="/metrics">/metrics</a>' in page and "<td>/api/v1/steps</td>" in page  # POST: no link
    assert "/opt/&lt;npu&gt;/npu-smi" in page and "<npu>" not in page
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert "<td>pods</td><td>off</td><td>collector.pods is off</td>" in rows
    assert "<td>npu_smi_info</td><td>ok</td><td>1970-01-01 00:16:40 UTC (30 s ago)</td><td>3</td><td>none</td>" in rows
    assert "<td>hccn_link</td><td>failing</td><td>never</td><td>2</td><td>timeout 2</td>" in rows
    assert "<td>profiles</td><td>not run yet</td><td>never</td><td>0</td><td>none</td>" in rows


def test_a_running_exporter_lists_every_endpoint_and_its_collectors(start):
    exporter = start("--simulate", "--no-hccn.enabled", "--no-collector.pods")
    exporter.wait_for(lambda found: any(name == "npu_up" for name, _ in found))
    status, page = exporter.get("/")
    assert status == 200 and f"cann-exporter {__version__}" in page
    for path in ("/metrics", "/healthz", "/readyz", "/api/v1/openapi.yaml"):
        assert f'<a href="{path}">{path}</a>' in page
    assert "<td>POST</td><td>/api/v1/steps</td>" in page
    # Every route is described (an empty description cell is a route someone forgot here).
    described = re.findall(r"<td>(?:GET|POST|HEAD)</td><td>(?:<a [^>]*>)?([^<]+)(?:</a>)?</td><td>([^<]*)</td>", page)
    assert described and all(text for _, text in described), described
    assert "<td>devices</td><td>on</td><td>npu-smi: the built-in simulator (910b3, scenario healthy)</td>" in page
    assert "<td>pods</td><td>off</td><td>collector.pods is off</td>" in page
    assert "<td>network</td><td>off</td><td>hccn.enabled is false</td>" in page
    assert re.search(r"<td>npu_smi_info</td><td>ok</td><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)</td>", page)
