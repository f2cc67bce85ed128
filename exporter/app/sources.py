"""The web server's own parts, registered after the node's table (node/sources.py) by `serve`:
its web config's counts (reloads, refusals, bcrypt checks) and its listener's (connections,
deadlines, bodies in flight). Both are live parts: the publisher reads them on its short
cadence, like the pushed training steps. Both are under `collector.self`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exporter.core.registration import Build, Collect, Registration
from exporter.core.source import Live, Source
from exporter.web.collector import HTTP, WEB, HttpCollector, HttpStatus, WebCollector

if TYPE_CHECKING:  # serve's web config; the metric reference and `once` never load aiohttp's server
    from exporter.web.security import WebSecurity


def web_sources(security: WebSecurity | None = None, http: Callable[[], HttpStatus] | None = None) -> tuple[Registration[Any], ...]:
    """The registrations of ``security``'s part (--web.config.file) and ``http``'s (the
    listener's counts); each is off without its object or with `collector.self` off."""

    def web(b: Build[None]) -> Source | None:
        on = security is not None and b.on("self")  # its metrics only; serve enforces it either way
        return Live(WEB.name, security.part, security) if on and security is not None else None

    def listener(b: Build[None]) -> Source | None:
        return Live(HTTP.name, http) if http is not None and b.on("self") else None

    return (
        Registration(WEB, web, (Collect("self", WebCollector),)),
        Registration(HTTP, listener, (Collect("self", HttpCollector),)),
    )
