"""`cann-exporter serve`: the long-running exporter (the default command)."""

from __future__ import annotations

import errno
import logging
import socket
import sys

from exporter import __version__
from exporter.app.settings import Settings
from exporter.app.sources import web_sources
from exporter.commands.reload import Apply, Reread, hold_sighup, reload_on_sighup
from exporter.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from exporter.core.gil import favour_the_event_loop
from exporter.core.heap import freeze_startup
from exporter.core.shutdown import leave
from exporter.jobs import http as ingest_http
from exporter.jobs.options import INGEST_OPTIONS
from exporter.jobs.store import IngestStore
from exporter.node.assembly import Node, assemble
from exporter.npusmi.faultcodes import FaultCodeError
from exporter.npusmi.options import NPU_SMI_OPTIONS
from exporter.npusmi.source import NpuSmiSource
from exporter.profiles.posted import POSTED
from exporter.web.config import WebConfigError
from exporter.web.listen import addresses, bind
from exporter.web.security import WebSecurity

log = logging.getLogger("exporter")


def web_security(settings: Settings) -> WebSecurity | None:
    """The WebSecurity for --web.config.file, or None; WebConfigError when the file is bad."""
    if settings.web.config_file is None:
        return None
    exempt = frozenset({"/healthz", "/readyz"}) if settings.web.auth_exempt_health else frozenset()
    return WebSecurity.from_file(settings.web.config_file, exempt_paths=exempt)


def live_settings(node: Node) -> Apply:
    """What SIGHUP applies without a restart from valid re-read settings: the npu-smi intervals
    and the fault-code table."""
    devices = node.source(NpuSmiSource)

    def apply(new: Settings) -> None:
        if devices is None:
            return
        devices.apply(new[NPU_SMI_OPTIONS])  # the intervals
        try:
            devices.reload_fault_codes(new[NPU_SMI_OPTIONS].fault_codes)
        except FaultCodeError as exc:  # changed since the settings were checked: keep the table in use
            log.error("SIGHUP: the fault-code table has problems; the one in use stays", extra={"problems": "; ".join(exc.problems)})
        else:
            log.info(
                "SIGHUP: fault-code table re-read", extra={"file": devices.fault_codes.origin, "codes": len(devices.fault_codes.levels)}
            )

    return apply


def _bind(listen: tuple[str, int], flag: str) -> list[socket.socket] | None:
    """The listening sockets of ``listen``, or None with the reason logged."""
    host, port = listen
    try:
        return bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            log.error(f"address already in use; choose another with {flag}", extra={"address": f"{host}:{port}"})
        else:
            log.error("cannot listen", extra={"address": f"{host}:{port}", "error": str(exc)})
        return None


def run(settings: Settings, reread: Reread | None = None) -> int:
    """Serve until SIGINT or SIGTERM; SIGHUP re-reads the files (``reread``: the settings as
    at start, from the files again)."""
    hold_sighup()
    from exporter.web.app import create_app
    from exporter.web.fds import fit_open_files
    from exporter.web.server import HttpServer

    try:
        security = web_security(settings)
    except WebConfigError as exc:
        for problem in exc.problems:
            print(f"cann-exporter: configuration error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    http = HttpServer(fit_open_files(settings.web))
    node = assemble(settings, more=web_sources(security, http.status))
    token = settings[INGEST_OPTIONS].token
    store = node.source(IngestStore)
    routes = ingest_http.routes(store, token, node.shared(POSTED), node.sampler.publish) if store is not None else []
    app = create_app(
        node.publisher,
        node.ready,
        routes=routes,
        bearer_paths=ingest_http.bearer_paths(token),
        security=security,
        background=[node.sampler.run_forever, node.publisher.run, reload_on_sighup(settings, reread, security, live_settings(node))],
        about=node.about,
    )
    sockets = _bind(settings.listen, "--listen")
    health = settings.web.health_listen
    health_sockets = _bind(health, "--web.health-listen") if health is not None and sockets is not None else []
    if sockets is None or health_sockets is None:
        for sock in sockets or ():
            sock.close()
        return EXIT_FAILURE
    ssl_context = security.ssl_context if security is not None else None
    log.info("listening", extra={"address": addresses(sockets), "tls": ssl_context is not None, "version": __version__})
    if health_sockets:
        log.info("answering /healthz and /readyz on the health listener", extra={"health_address": addresses(health_sockets)})
    freeze_startup()
    favour_the_event_loop()
    http.run(app, sockets, ssl_context, health_sockets)
    return leave(EXIT_OK)  # a worker stuck in a read must not keep the stopped exporter alive
