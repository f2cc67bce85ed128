"""Every metric the exporter can serve: the specs of every collector in the node's source table
and the web server's, in their order (the metric reference, docs/metrics.md)."""

from __future__ import annotations

from exporter.app.settings import TABLE
from exporter.core.metric import MetricSpec, markdown_table

REGISTRATIONS = TABLE

ALL_METRICS: tuple[MetricSpec, ...] = tuple(
    spec for registration in REGISTRATIONS for c in registration.collectors for spec in c.make().specs
)

DOC_HEADER = "# Metric reference\n\nGenerated from the metric specs each package declares; do not edit by hand.\n\n"
# Where a table row cannot say enough: notes the packages declare next to their specs.
DOC_NOTES = tuple(note for registration in REGISTRATIONS for note in registration.notes)


def metrics_doc() -> str:
    """The text of docs/metrics.md."""
    return DOC_HEADER + markdown_table(ALL_METRICS) + "".join("\n" + note for note in DOC_NOTES)
