"""The exporter-health dashboard: the exporters themselves, their scrapes, sources, resources
and the training-hook ingest."""

from __future__ import annotations

from exporter.generate.board import Board, node_vars
from exporter.generate.common import pct, positive
from exporter.generate.panels import (
    ANY_RED,
    RATIO,
    SEL,
    UP_GREEN,
    Panel,
    alert_steps,
    graph,
    graphs,
    grid,
    history,
    info_grid,
    q,
    rate,
    threshold,
    two_states,
)
from exporter.thresholds.table import AlertSpec, Thresholds

SOURCE_LEGEND = "{{instance}} {{source}}"


def exporter_health(table_: Thresholds) -> Board:
    return (
        Board(
            "exporter-health",
            "The exporters themselves: scrape health, sources, resources, the training-hook ingest.",
            time_from="now-6h",
            variables=node_vars(),
        )
        .row("Scrapes", *_scrapes())
        .row("Sources (npu-smi)", *_sources())
        .row("Resources", *_resources(table_))
        .row("Training-hook ingest", *_ingest())
    )


def _mine(metric: str) -> str:
    return f"{metric}{{{SEL}}}"


def _scrapes() -> list[Panel]:
    return [
        two_states("Exporter up", q(_mine("up"), "{{instance}}"), ("down", "up"), h=5),
        graph("Scrape duration", q(_mine("scrape_duration_seconds"), "{{instance}}"), unit="s", lo=0, w=12, h=7),
        graph("Samples per scrape", q(_mine("scrape_samples_scraped"), "{{instance}}"), unit="short", lo=0, w=12, h=7),
    ]


def _sources() -> list[Panel]:
    since = f"time() - {_mine('cann_exporter_source_last_success_timestamp_seconds')}"
    errors = rate("cann_exporter_source_errors_total", "instance, source, reason", SEL)
    return [
        history("Source success", q(_mine("cann_exporter_source_success"), SOURCE_LEGEND), h=6, steps=UP_GREEN),
        graph("Source duration", q(_mine("cann_exporter_source_duration_seconds"), SOURCE_LEGEND), unit="s", lo=0, w=8),
        graph("Source errors by reason", q(errors, "{{instance}} {{source}} {{reason}}"), unit="ops", lo=0, w=8),
        graph("Time since the last success", q(since, SOURCE_LEGEND), unit="s", lo=0, w=8),
        graph("Source runs", q(rate("cann_exporter_source_runs_total", "instance, source", SEL), SOURCE_LEGEND), unit="ops", lo=0, w=8),
        graph("Stale chips withheld", q(_mine("cann_exporter_stale_chips"), "{{instance}}"), lo=0, w=8, steps=ANY_RED),
        grid(
            "Builds",
            q(_mine("cann_exporter_build_info"), table_format=True),
            q(_mine("cann_exporter_simulated"), table_format=True),
            hidden=("__name__", "Value", "Value #A", "Value #B"),
            w=8,
        ),
        grid(
            "Failing subjects (latest run)",
            q(_mine("cann_exporter_source_subject_failing"), table_format=True),
            hidden=("__name__", "Value"),
            w=8,
            description="What fails in a source (a command on one card, e.g. usages -i 3) and why; "
            "the rest of the source is fresh. At most 16 per source.",
        ),
    ]


def _against(title: str, ratio: str, spec: AlertSpec | None, description: str) -> Panel:
    """The exporters' use of a limit, 0 to 100%, red from the alert's threshold."""
    return graph(title, q(ratio, "{{instance}}"), **RATIO, steps=alert_steps(spec), w=8, description=description)


def _resources(table_: Thresholds) -> list[Panel]:
    memory, fds = table_.find("CANNExporterMemoryHigh"), table_.find("CANNExporterFileDescriptorsHigh")
    resident = _mine("process_resident_memory_bytes")
    gc = rate("python_gc_collections_total", "instance, generation", SEL)
    return [
        _against(
            "Memory against the limit",
            f"{resident} / {positive(_mine('cann_exporter_memory_limit_bytes'))}",
            memory,
            f"Resident memory over the cgroup memory limit; CANNExporterMemoryHigh fires above {pct(threshold(memory) or 0)}. Empty where the exporter runs without a limit.",
        ),
        graph(
            "Resident memory",
            q(resident, "{{instance}}"),
            q(_mine("cann_exporter_memory_limit_bytes"), "limit {{instance}}"),
            unit="bytes",
            lo=0,
            w=8,
        ),
        graph(
            "CPU",
            q(f"rate({_mine('process_cpu_seconds_total')}[$__rate_interval])", "{{instance}}"),
            unit="percentunit",
            lo=0,
            w=8,
            description="CPU time per second of wall time (1 = one core).",
        ),
        _against(
            "File descriptors against the maximum",
            f"{_mine('process_open_fds')} / {positive(_mine('process_max_fds'))}",
            fds,
            f"CANNExporterFileDescriptorsHigh fires above {pct(threshold(fds) or 0)}.",
        ),
        graph(
            "Garbage collections",
            q(gc, "{{instance}} generation {{generation}}"),
            unit="ops",
            lo=0,
            w=8,
            description="Python garbage-collector runs per second by generation; generation 2 runs are the expensive ones.",
        ),
        info_grid("Python", _mine("python_info"), w=8),
    ]


def _ingest() -> list[Panel]:
    def per_instance(metric: str) -> str:
        return rate(metric, "instance", SEL)

    rates = (
        (
            "Accepted",
            (
                (per_instance("cann_exporter_ingest_requests_total"), "{{instance}} batches/s"),
                (per_instance("cann_exporter_ingest_steps_total"), "{{instance}} steps/s"),
            ),
            "",
        ),
        (
            "Rejected and dropped",
            (
                (rate("cann_exporter_ingest_rejected_total", "instance, reason", SEL), "{{instance}} rejected {{reason}}"),
                (per_instance("cann_exporter_ingest_client_dropped_steps_total"), "{{instance}} dropped by clients"),
                (per_instance("cann_exporter_ingest_expired_total"), "{{instance}} expired ranks"),
            ),
            "",
        ),
    )
    return [
        *graphs(rates, unit="ops", lo=0, w=8),
        graph("Job ranks held", q(_mine("cann_exporter_ingest_ranks"), "{{instance}}"), lo=0, w=8),
    ]
