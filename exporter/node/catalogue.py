"""Every metric the exporter can serve, gathered from the packages that declare them, in the
order of the metric reference (docs/metrics.md)."""

from __future__ import annotations

from exporter.core.metric import MetricSpec, markdown_table
from exporter.core.selfmetrics import SELF_METRICS, SOURCE_NOTE
from exporter.hccn.metrics import NETWORK_METRICS
from exporter.jobs.metrics import INGEST_METRICS, JOB_METRICS
from exporter.npusmi.metrics import CHIP_METRICS, ECC_NOTE, PROCESS_METRICS
from exporter.pods.metrics import POD_METRICS
from exporter.profiles.metrics import PROFILE_METRICS
from exporter.resources.metrics import RESOURCE_METRICS
from exporter.web.metrics import HTTP_METRICS, WEB_METRICS

ALL_METRICS: tuple[MetricSpec, ...] = (
    CHIP_METRICS + PROCESS_METRICS + POD_METRICS + SELF_METRICS + RESOURCE_METRICS + WEB_METRICS + HTTP_METRICS + JOB_METRICS + INGEST_METRICS
    + PROFILE_METRICS + NETWORK_METRICS
)

DOC_HEADER = "# Metric reference\n\nGenerated from the metric specs each package declares; do not edit by hand.\n\n"
# Where a table row cannot say enough: notes the packages declare next to their specs.
DOC_NOTES = (ECC_NOTE, SOURCE_NOTE)


def metrics_doc() -> str:
    """The text of docs/metrics.md."""
    return DOC_HEADER + markdown_table(ALL_METRICS) + "".join("\n" + note for note in DOC_NOTES)
