"""The web metrics: the web config's (present only with --web.config.file: reloads, refusals
and the bcrypt checks) and the HTTP listener's (`serve` only: connections, the cap, deadlines,
accept errors)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import Metric

from exporter.core.metric import family, part_families
from exporter.core.snapshot import PartKey
from exporter.web.metrics import (
    HTTP_METRICS,
    WEB_AUTH_BCRYPT_CHECKS,
    WEB_AUTH_BCRYPT_PENDING,
    WEB_AUTH_FAILURES,
    WEB_CONFIG_RELOAD_SUCCESS,
    WEB_CONFIG_RELOAD_TIME,
    WEB_CONFIG_RELOADS,
    WEB_METRICS,
)


@dataclass(frozen=True)
class WebStatus:
    last_reload_success: bool = True
    last_reload_success_time: float = 0.0  # Unix time
    reloads: tuple[tuple[str, int], ...] = ()  # (success|failure, count)
    auth_failures: tuple[tuple[str, int], ...] = ()  # (reason, count)
    bcrypt_checks: int = 0  # started so far
    bcrypt_pending: int = 0  # queued or running now


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
        checks, pending = family(WEB_AUTH_BCRYPT_CHECKS), family(WEB_AUTH_BCRYPT_PENDING)
        checks.add_metric([], part.bcrypt_checks)
        pending.add_metric([], part.bcrypt_pending)
        yield from (success, last, reloads, failures, checks, pending)


@dataclass(frozen=True)
class HttpStatus:
    connections: int = 0  # open now, health slots included
    max_connections: int = 0  # the cap in force
    rejected: tuple[tuple[str, int], ...] = ()  # (reason, count)
    timeouts: tuple[tuple[str, int], ...] = ()  # (kind, count)
    accept_errors: tuple[tuple[str, int], ...] = ()  # (errno name, count)
    request_errors: tuple[tuple[str, int], ...] = ()  # (reason, count)
    body_bytes_in_flight: int = 0  # reserved by requests being handled
    max_body_bytes_in_flight: int = 0  # the budget


class HttpCollector:
    specs = HTTP_METRICS

    def render(self, part: HttpStatus) -> Iterator[Metric]:
        return part_families(HTTP_METRICS, part)


WEB = PartKey("web", WebStatus)  # snapshot keys of the web layer's own parts
HTTP = PartKey("http", HttpStatus)
