"""The exporter-health dashboard: the exporters themselves, their scrapes, sources, resources
and the training-hook ingest."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from exporter.generate.common import pct
from exporter.generate.panels import (
    GREEN,
    RED,
    Board,
    graph,
    grid,
    history,
    limit_steps,
    node_vars,
    q,
)
from exporter.thresholds.table import Thresholds


def exporter_health(table_: Thresholds) -> Board:
    sel = 'job=~"$job", instance=~"$instance"'
    b = Board(
        "exporter-health",
        "The exporters themselves: scrape health, sources, resources, the training-hook ingest.",
        time_from="now-6h",
        variables=node_vars(),
    )
    b.row("Scrapes")
    b.add(
        history(
            "Exporter up",
            q(f"up{{{sel}}}", "{{instance}}"),
            h=5,
            steps=[dm.Threshold(value=None, color=RED), dm.Threshold(value=1, color=GREEN)],
            mappings=[
                dm.ValueMap(
                    options={
                        "0": dm.ValueMappingResult(text="down", color=RED, index=0),
                        "1": dm.ValueMappingResult(text="up", color=GREEN, index=1),
                    }
                )
            ],
        ),
        graph("Scrape duration", q(f"scrape_duration_seconds{{{sel}}}", "{{instance}}"), unit="s", lo=0, w=12, h=7),
        graph("Samples per scrape", q(f"scrape_samples_scraped{{{sel}}}", "{{instance}}"), unit="short", lo=0, w=12, h=7),
    )
    b.row("Sources (npu-smi)")
    b.add(
        history(
            "Source success",
            q(f"cann_exporter_source_success{{{sel}}}", "{{instance}} {{source}}"),
            h=6,
            steps=[dm.Threshold(value=None, color=RED), dm.Threshold(value=1, color=GREEN)],
        ),
        graph("Source duration", q(f"cann_exporter_source_duration_seconds{{{sel}}}", "{{instance}} {{source}}"), unit="s", lo=0, w=8),
        graph(
            "Source errors by reason",
            q(
                f"sum by (instance, source, reason) (rate(cann_exporter_source_errors_total{{{sel}}}[$__rate_interval]))",
                "{{instance}} {{source}} {{reason}}",
            ),
            unit="ops",
            lo=0,
            w=8,
        ),
        graph(
            "Time since the last success",
            q(f"time() - cann_exporter_source_last_success_timestamp_seconds{{{sel}}}", "{{instance}} {{source}}"),
            unit="s",
            lo=0,
            w=8,
        ),
        graph(
            "Source runs",
            q(f"sum by (instance, source) (rate(cann_exporter_source_runs_total{{{sel}}}[$__rate_interval]))", "{{instance}} {{source}}"),
            unit="ops",
            lo=0,
            w=8,
        ),
        graph(
            "Stale chips withheld",
            q(f"cann_exporter_stale_chips{{{sel}}}", "{{instance}}"),
            unit="short",
            lo=0,
            w=8,
            steps=[dm.Threshold(value=None, color=GREEN), dm.Threshold(value=1, color=RED)],
        ),
        grid(
            "Builds",
            q(f"cann_exporter_build_info{{{sel}}}", table_format=True),
            q(f"cann_exporter_simulated{{{sel}}}", table_format=True),
            hidden=("__name__", "Value", "Value #A", "Value #B"),
            w=8,
        ),
        grid(
            "Failing subjects (latest run)",
            q(f"cann_exporter_source_subject_failing{{{sel}}}", table_format=True),
            hidden=("__name__", "Value"),
            w=8,
            description="What fails in a source (a command on one card, e.g. usages -i 3) and why; "
            "the rest of the source is fresh. At most 16 per source.",
        ),
    )
    resources_row(b, table_, sel)
    b.row("Training-hook ingest")
    b.add(
        graph(
            "Accepted",
            q(f"sum by (instance) (rate(cann_exporter_ingest_requests_total{{{sel}}}[$__rate_interval]))", "{{instance}} batches/s"),
            q(f"sum by (instance) (rate(cann_exporter_ingest_steps_total{{{sel}}}[$__rate_interval]))", "{{instance}} steps/s"),
            unit="ops",
            lo=0,
            w=8,
        ),
        graph(
            "Rejected and dropped",
            q(
                f"sum by (instance, reason) (rate(cann_exporter_ingest_rejected_total{{{sel}}}[$__rate_interval]))",
                "{{instance}} rejected {{reason}}",
            ),
            q(
                f"sum by (instance) (rate(cann_exporter_ingest_client_dropped_steps_total{{{sel}}}[$__rate_interval]))",
                "{{instance}} dropped by clients",
            ),
            q(f"sum by (instance) (rate(cann_exporter_ingest_expired_total{{{sel}}}[$__rate_interval]))", "{{instance}} expired ranks"),
            unit="ops",
            lo=0,
            w=8,
        ),
        graph("Job ranks held", q(f"cann_exporter_ingest_ranks{{{sel}}}", "{{instance}}"), unit="short", lo=0, w=8),
    )
    return b


def _threshold(table_: Thresholds, alert: str) -> float | None:
    return next((a.threshold for a in table_.alerts if a.alert == alert), None)


def resources_row(b: Board, table_: Thresholds, sel: str) -> None:
    memory, fds = _threshold(table_, "CANNExporterMemoryHigh"), _threshold(table_, "CANNExporterFileDescriptorsHigh")
    b.row("Resources")
    b.add(
        graph(
            "Memory against the limit",
            q(f"process_resident_memory_bytes{{{sel}}} / cann_exporter_memory_limit_bytes{{{sel}}}", "{{instance}}"),
            unit="percentunit",
            lo=0,
            hi=1,
            steps=limit_steps(memory),
            w=8,
            description=(
                f"Resident memory over the cgroup memory limit; CANNExporterMemoryHigh fires above "
                f"{pct(memory or 0)}. Empty where the exporter runs without a limit."
            ),
        ),
        graph(
            "Resident memory",
            q(f"process_resident_memory_bytes{{{sel}}}", "{{instance}}"),
            q(f"cann_exporter_memory_limit_bytes{{{sel}}}", "limit {{instance}}"),
            unit="bytes",
            lo=0,
            w=8,
        ),
        graph(
            "CPU",
            q(f"rate(process_cpu_seconds_total{{{sel}}}[$__rate_interval])", "{{instance}}"),
            unit="percentunit",
            lo=0,
            w=8,
            description="CPU time per second of wall time (1 = one core).",
        ),
        graph(
            "File descriptors against the maximum",
            q(f"process_open_fds{{{sel}}} / process_max_fds{{{sel}}}", "{{instance}}"),
            unit="percentunit",
            lo=0,
            hi=1,
            steps=limit_steps(fds),
            w=8,
            description=f"CANNExporterFileDescriptorsHigh fires above {pct(fds or 0)}.",
        ),
        graph(
            "Garbage collections",
            q(
                f"sum by (instance, generation) (rate(python_gc_collections_total{{{sel}}}[$__rate_interval]))",
                "{{instance}} generation {{generation}}",
            ),
            unit="ops",
            lo=0,
            w=8,
            description="Python garbage-collector runs per second by generation; generation 2 runs are the expensive ones.",
        ),
        grid("Python", q(f"python_info{{{sel}}}", table_format=True), hidden=("__name__", "job", "Value"), w=8),
    )
