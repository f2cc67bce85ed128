"""The HTTP server of `cann-exporter serve`: aiohttp's request handling behind our own accept
loop (accept.py), connection cap (limits.py) and per-connection deadlines (connection.py).

In place of aiohttp's run_app: the app runs under an AppRunner whose protocol factory serves
each admitted connection, on the sockets listen.py bound. SIGINT and SIGTERM stop it as
run_app did (aiohttp's GracefulExit, then the app's cleanup).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable

from aiohttp import web

from exporter.core.shutdown import REQUEST_GRACE
from exporter.web.accept import AcceptErrors, Acceptor
from exporter.web.collector import HttpStatus
from exporter.web.connection import ConnectionGuard
from exporter.web.limits import ConnectionTable
from exporter.web.options import WebOptions
from exporter.web.probes import PROBES

# At SIGTERM, in-flight requests get this long (handlers are quick; a client that does not read
# would otherwise hold the exit for aiohttp's 60 s, past the unit's and the pod's stop timeouts).
SHUTDOWN_GRACE = REQUEST_GRACE


class HttpServer:
    """The listener's bounds and counts; ``status`` is the part /metrics renders."""

    def __init__(self, options: WebOptions) -> None:
        self.options = options
        self.table = ConnectionTable(options.max_connections, options.health_connections)
        self.accept_errors = AcceptErrors()

    def status(self) -> HttpStatus:
        return HttpStatus(
            self.table.open, self.table.max_connections, tuple(self.table.rejected.items()),
            tuple(self.table.timeouts.items()), tuple(sorted(self.accept_errors.counts.items())),
        )

    def run(self, app: web.Application, sockets: list[socket.socket], ssl_context: ssl.SSLContext | None = None,
            refuse: Callable[[str | None], bool] | None = None) -> None:
        """Serve ``app`` on ``sockets`` until SIGINT or SIGTERM; ``refuse(peer)`` turns a new
        connection away at accept (an address out of its failed-login budget)."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        main = loop.create_task(self.serve(app, sockets, ssl_context, refuse=refuse))
        try:
            loop.run_until_complete(main)
        except (web.GracefulExit, KeyboardInterrupt):
            pass
        finally:
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def serve(self, app: web.Application, sockets: list[socket.socket], ssl_context: ssl.SSLContext | None = None,
                    *, handle_signals: bool = True, refuse: Callable[[str | None], bool] | None = None) -> None:
        """Serve until cancelled (tests run it as a task)."""
        loop = asyncio.get_running_loop()
        previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self.accept_errors.loop_handler)
        runner: web.AppRunner | None = None

        def make_handler() -> asyncio.Protocol:
            assert runner is not None and runner.server is not None
            return runner.server()

        guard = ConnectionGuard(self.table, self.options, make_handler, loop, ssl_context, refuse, app.get(PROBES))
        app.middlewares.insert(0, guard.middleware())
        # aiohttp's keep-alive close is only a backstop: the idle deadline fires first, and counts.
        # A connection closed by a deadline cancels its handler, rather than failing its read with
        # a traceback in the log for every slow client.
        runner = web.AppRunner(app, handle_signals=handle_signals, access_log=None, shutdown_timeout=SHUTDOWN_GRACE,
                               keepalive_timeout=self.options.idle_timeout + self.options.header_timeout,
                               handler_cancellation=True)
        await runner.setup()
        acceptors = [Acceptor(sock, guard.accepted, self.accept_errors, loop) for sock in sockets]
        try:
            for acceptor in acceptors:
                acceptor.start()
            await asyncio.Event().wait()
        finally:
            for acceptor in acceptors:
                acceptor.close()
            await runner.cleanup()
            loop.set_exception_handler(previous_handler)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
