"""`/runbooks`: the alert runbooks served by the exporter, one anchor per alert as its
runbook_url names it, from a packaged copy that equals docs/runbooks.md."""

from __future__ import annotations

import re

import yaml

from exporter.web.runbooks import anchor, render
from tests.support.paths import ROOT


def alert_names() -> set[str]:
    doc = yaml.safe_load((ROOT / "alerts" / "cann-exporter.alerts.yml").read_text())
    return {rule["alert"] for group in doc["groups"] for rule in group["rules"]}


def test_the_packaged_runbooks_are_docs_runbooks() -> None:
    """`make generate` copies docs/runbooks.md into the package (the exporter serves the copy)."""
    assert (ROOT / "exporter" / "web" / "runbooks.md").read_bytes() == (ROOT / "docs" / "runbooks.md").read_bytes()


def test_headings_get_githubs_anchors_and_raw_html_stays_text() -> None:
    page = render(
        "# Alert runbooks\n\n## NPULowUtilization\n\nSee <script>x</script> and `a<b`.\n\n"
        "## Why 1 minute, and the handover\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    assert '<h2 id="npulowutilization">NPULowUtilization</h2>' in page
    assert '<h2 id="why-1-minute-and-the-handover">' in page and anchor("CANNExporterDown") == "cannexporterdown"
    assert "<script>" not in page and "&lt;script&gt;" in page and "<td>2</td>" in page


def test_a_running_exporter_serves_a_section_for_every_alert(start) -> None:
    exporter = start("--simulate", "--no-hccn.enabled", "--no-collector.pods")
    status, page = exporter.get("/runbooks")
    assert status == 200 and "<title>cann-exporter runbooks</title>" in page
    ids = set(re.findall(r'<h2 id="([^"]+)">', page))
    assert {name.lower() for name in alert_names()} <= ids, sorted({n.lower() for n in alert_names()} - ids)
    status, landing = exporter.get("/")
    assert '<a href="/runbooks">/runbooks</a>' in landing
