"""The exporter's own metrics: build, simulator, per-source health and withheld chips."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from exporter import __version__
from exporter.core.health import SourceStatus
from exporter.core.metric import family, spec

BUILD_INFO = spec("cann_exporter_build_info", "gauge", "Exporter build; value 1.", ("version", "python_version"),
                  field=("version", "python_version"))
SIMULATED = spec("cann_exporter_simulated", "gauge", "1 when the data comes from the built-in simulator.", ("scenario", "model"),
                 field="simulated")
SOURCE_SUCCESS = spec("cann_exporter_source_success", "gauge", "1 if the source's latest run succeeded.", ("source",),
                      field="success")
SOURCE_DURATION = spec("cann_exporter_source_duration_seconds", "gauge", "Duration of the source's latest run, seconds.",
                       ("source",), field="duration_seconds")
SOURCE_ERRORS = spec("cann_exporter_source_errors_total", "counter", "Source failures by reason.", ("source", "reason"),
                     field="errors")
SOURCE_LAST_SUCCESS = spec("cann_exporter_source_last_success_timestamp_seconds", "gauge",
                           "Unix time of the source's latest successful run.", ("source",), field="last_success_timestamp")
SOURCE_RUNS = spec("cann_exporter_source_runs_total", "counter", "Runs of the source.", ("source",), field="runs")
STALE_CHIPS = spec("cann_exporter_stale_chips", "gauge", "Chips whose data is older than max age and is not served.",
                   field="stale_chips")

SELF_METRICS = (BUILD_INFO, SIMULATED, SOURCE_SUCCESS, SOURCE_DURATION, SOURCE_ERRORS, SOURCE_LAST_SUCCESS, SOURCE_RUNS, STALE_CHIPS)


@dataclass(frozen=True)
class StatusPart:
    """The exporter itself at one moment."""

    sources: tuple[SourceStatus, ...] = ()
    simulated: tuple[str, str] | None = None     # (scenario, model) when running on the simulator
    stale_chips: int = 0                         # chips withheld because their data is too old
    version: str = __version__
    python_version: str = platform.python_version()


class StatusCollector:
    specs = SELF_METRICS

    def render(self, part: StatusPart) -> Iterator[Metric]:
        build = family(BUILD_INFO)
        build.add_metric([part.version, part.python_version], 1)
        yield build
        if part.simulated is not None:
            simulated = family(SIMULATED)
            simulated.add_metric(list(part.simulated), 1)
            yield simulated

        success, duration, errors = family(SOURCE_SUCCESS), family(SOURCE_DURATION), family(SOURCE_ERRORS)
        last, runs = family(SOURCE_LAST_SUCCESS), family(SOURCE_RUNS)
        for source in part.sources:
            success.add_metric([source.name], 1 if source.success else 0)
            runs.add_metric([source.name], source.runs)
            if source.duration_seconds is not None:
                duration.add_metric([source.name], source.duration_seconds)
            if source.last_success_timestamp is not None:
                last.add_metric([source.name], source.last_success_timestamp)
            for reason, count in sorted(source.errors.items()):
                errors.add_metric([source.name, reason], count)
        yield from (success, duration, errors, last, runs)

        stale = family(STALE_CHIPS)
        stale.add_metric([], part.stale_chips)
        yield stale
