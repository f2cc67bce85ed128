"""The web config's own metrics (present only with --web.config.file): reloads and refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from exporter.core.metric import family
from exporter.web.metrics import (
    WEB_AUTH_FAILURES,
    WEB_CONFIG_RELOAD_SUCCESS,
    WEB_CONFIG_RELOAD_TIME,
    WEB_CONFIG_RELOADS,
    WEB_METRICS,
)


@dataclass(frozen=True)
class WebStatus:
    last_reload_success: bool = True
    last_reload_success_time: float = 0.0             # Unix time
    reloads: tuple[tuple[str, int], ...] = ()         # (success|failure, count)
    auth_failures: tuple[tuple[str, int], ...] = ()   # (reason, count)


class WebCollector:
    specs = WEB_METRICS

    def render(self, part: WebStatus) -> Iterator[Metric]:
        success, last = family(WEB_CONFIG_RELOAD_SUCCESS), family(WEB_CONFIG_RELOAD_TIME)
        success.add_metric([], 1 if part.last_reload_success else 0)
        last.add_metric([], part.last_reload_success_time)
        reloads, failures = family(WEB_CONFIG_RELOADS), family(WEB_AUTH_FAILURES)
        for result, count in part.reloads:
            reloads.add_metric([result], count)
        for reason, count in part.auth_failures:
            failures.add_metric([reason], count)
        yield from (success, last, reloads, failures)
