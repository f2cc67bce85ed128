"""The health listener (``web.health_listen``): a second port answering /healthz and /readyz only,
for kubelet probes, with bounds of its own.

A probe opens a new connection each time. On the main port it shares its address's budgets with
everything else from that address (new connections a second, connections held, TLS handshakes):
a flood of connections from the address a probe comes from (a node's own address, loopback) spends
them, and the probe's connection is refused at accept. Here nothing of the main port's traffic
counts: its own small table, per-address caps and rate, the same front (deadlines, the lobby,
every request parsed by aiohttp), plain HTTP and no credentials (what it answers is "ok" and
"ready"; with TLS or mutual TLS on the main port, an httpGet probe works here where it could not
there). Its refusals and deadlines are counted with the main listener's
(``cann_exporter_http_*``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from aiohttp import web

from exporter.web.app import READY, healthz, readyz, server_header
from exporter.web.limits import ConnectionTable
from exporter.web.options import WebOptions

# Kubelet probes are one liveness and one readiness probe every few seconds, from one address;
# these leave room for a few kubelets and scripts, and are the whole of what a flood can hold.
HEALTH_LISTENER_CONNECTIONS = 16
HEALTH_LISTENER_PER_ADDRESS = 8
HEALTH_LISTENER_PER_SECOND = 20  # new connections one address may open a second
HEALTH_LISTENER_BURST = 40


def health_app(ready: Callable[[], bool]) -> web.Application:
    """/healthz and /readyz, nothing else (404), no body read."""
    app = web.Application(client_max_size=1024)
    app.on_response_prepare.append(server_header)
    app[READY] = ready
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def health_options(options: WebOptions) -> WebOptions:
    """The main listener's deadlines, the health listener's own bounds."""
    return replace(
        options,
        max_connections=HEALTH_LISTENER_CONNECTIONS,
        max_connections_per_address=HEALTH_LISTENER_PER_ADDRESS,
        new_connections_per_second=HEALTH_LISTENER_PER_SECOND,
        new_connections_burst=HEALTH_LISTENER_BURST,
    )


def health_table(shared: ConnectionTable) -> ConnectionTable:
    """The health listener's table, counting into ``shared``'s refusals and deadlines."""
    table = ConnectionTable(HEALTH_LISTENER_CONNECTIONS, 0, HEALTH_LISTENER_PER_ADDRESS)
    table.rejected, table.timeouts = shared.rejected, shared.timeouts
    return table
