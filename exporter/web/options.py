"""`listen` and `web.*`: where the exporter serves, the web config that guards it and the
bounds that keep one client from exhausting it (limits.py, guard.py, bodies.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.core.options import (
    option,
    optional_text,
    parse_bool,
    parse_duration,
    parse_listen,
    parse_positive_int,
)


def parse_optional_listen(value: Any) -> tuple[str, int] | None:
    """`HOST:PORT` or `:PORT` as for `listen`; unset (None or empty): no such listener."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_listen(value)


def listen_option() -> Any:
    """The top-level `listen` key (a field of the settings class)."""
    return option(
        ":9435",
        parse_listen,
        "address to serve /metrics on, HOST:PORT or :PORT (port 0: any free port, logged)",
        metavar="HOST:PORT",
        serve_only=True,
    )


@dataclass(frozen=True)
class WebOptions:
    config_file: str | None = option(
        None,
        optional_text,
        "exporter-toolkit web config (TLS, mTLS, basic auth, headers), the format node_exporter's --web.config.file reads; reloaded on change",
        flag="--web.config.file",
        metavar="FILE",
    )
    auth_exempt_health: bool = option(True, parse_bool, "serve /healthz and /readyz without basic auth (kubelet probes)")
    health_listen: tuple[str, int] | None = option(
        None,
        parse_optional_listen,
        "a second listener, plain HTTP without auth, answering /healthz and /readyz only, with bounds of its own (kubelet probes: a flood on the main port cannot reach them); unset: none",
        metavar="HOST:PORT",
        serve_only=True,
    )
    max_connections: int = option(
        256,
        parse_positive_int,
        "open connections served at most; a new one then replaces one idle for over a second, else gets a health slot (/healthz and /readyz only) or is closed; lowered at start if the open-file limit is too low",
        metavar="N",
    )
    health_connections: int = option(
        8,
        parse_positive_int,
        "connections kept beyond max_connections for /healthz and /readyz only, so kubelet probes get through a full server",
        metavar="N",
    )
    max_connections_per_address: int = option(
        64,
        parse_positive_int,
        "open connections one client address holds at most; past it, its own connection silent longest makes room, else the new one is closed",
        metavar="N",
    )
    new_connections_per_second: int = option(
        100,
        parse_positive_int,
        "new connections one client address may open a second (loopback included), on average; past it they are closed at accept, before they cost a slot",
        metavar="N",
    )
    new_connections_burst: int = option(
        200,
        parse_positive_int,
        "new connections one client address may open at once before web.new_connections_per_second applies",
        metavar="N",
    )
    max_tls_handshakes: int = option(
        64,
        parse_positive_int,
        "TLS handshakes run at once at most; a handshake starts only once the client has sent its first byte, and later ones wait their turn",
        metavar="N",
    )
    max_body_bytes_in_flight: int = option(
        16 << 20,
        parse_positive_int,
        "request bytes all connections together may have announced and not yet delivered to a handler; a body that would pass it gets 503 at once, unread",
        metavar="BYTES",
    )
    header_timeout: float = option(
        "10s",
        parse_duration,
        "close a connection that has not sent a request's headers this long after connecting (TLS handshake included) or after the request's first byte",
        metavar="DURATION",
    )
    body_timeout: float = option(
        "30s", parse_duration, "close a connection whose request body has not fully arrived this long after its headers", metavar="DURATION"
    )
    idle_timeout: float = option("75s", parse_duration, "close a keep-alive connection idle between requests this long", metavar="DURATION")
    write_timeout: float = option(
        "30s",
        parse_duration,
        "drop a connection that has not read what it was sent (write buffer full) this long, freeing its buffers",
        metavar="DURATION",
    )
