"""The HTTP server of `cann-exporter serve`: aiohttp's request handling behind the front
(guard.py: accept loop, connection cap, deadlines, TLS handshakes) and the budget of request
bodies in flight (bodies.py); and, with ``web.health_listen``, the health listener (health.py)
behind a front of its own.

In place of aiohttp's run_app: the app runs under an AppRunner whose protocol factory serves
each admitted connection, on the sockets listen.py bound. SIGINT and SIGTERM stop it as
run_app did (aiohttp's GracefulExit, then the app's cleanup).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Sequence

from aiohttp import web

from exporter.core.shutdown import REQUEST_GRACE
from exporter.web.app import READY
from exporter.web.bodies import MAX_BODY_BYTES, BodyBudget
from exporter.web.collector import HttpStatus
from exporter.web.fds import accept_error_counts
from exporter.web.guard import Front
from exporter.web.handler import LINGER, FrontHandler, NoAccessLog
from exporter.web.health import health_app, health_options, health_table
from exporter.web.limits import ConnectionTable
from exporter.web.options import WebOptions

# At SIGTERM, in-flight requests get this long (handlers are quick; a client that does not read
# would otherwise hold the exit for aiohttp's 60 s, past the unit's and the pod's stop timeouts).
SHUTDOWN_GRACE = REQUEST_GRACE


class HttpServer:
    """The listener's bounds and counts; ``status`` is the part /metrics renders."""

    def __init__(self, options: WebOptions) -> None:
        self.options = options
        self.table = ConnectionTable(options.max_connections, options.health_connections, options.max_connections_per_address)
        self.health_table = health_table(self.table)  # the health listener's, counting into the table's counts
        self.bodies = BodyBudget(options.max_body_bytes_in_flight, MAX_BODY_BYTES)
        self.accept_errors = accept_error_counts()
        self.front: Front | None = None
        self.health_front: Front | None = None

    def status(self) -> HttpStatus:
        return HttpStatus(
            self.table.open + self.health_table.open,
            self.table.max_connections,
            tuple(self.table.rejected.items()),
            tuple(self.table.timeouts.items()),
            tuple(sorted(self.accept_errors.items())),
            tuple(self.bodies.errors.items()),
            self.bodies.in_flight,
            self.bodies.limit,
        )

    def run(
        self,
        app: web.Application,
        sockets: list[socket.socket],
        ssl_context: ssl.SSLContext | None = None,
        health_sockets: Sequence[socket.socket] = (),
    ) -> None:
        """Serve ``app`` on ``sockets`` (and its /healthz and /readyz on ``health_sockets``) until
        SIGINT or SIGTERM."""
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        main = loop.create_task(self.serve(app, sockets, ssl_context, health_sockets=health_sockets))
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

    async def serve(
        self,
        app: web.Application,
        sockets: list[socket.socket],
        ssl_context: ssl.SSLContext | None = None,
        *,
        health_sockets: Sequence[socket.socket] = (),
        handle_signals: bool = True,
    ) -> None:
        """Serve until cancelled (tests run it as a task)."""
        app.middlewares.append(self.bodies.middleware())  # inside the auth middleware: after credentials
        runners: list[web.AppRunner] = []
        stops = []
        try:
            self.front = front = await self._front(app, self.table, self.options, ssl_context, runners, handle_signals)
            stops += [front.listen(sock) for sock in sockets]
            if health_sockets:
                health = health_app(app[READY])
                self.health_front = await self._front(health, self.health_table, health_options(self.options), None, runners, False)
                stops += [self.health_front.listen(sock) for sock in health_sockets]
            await asyncio.Event().wait()
        finally:
            for stop in stops:
                stop()
            for runner in runners:
                await runner.cleanup()

    async def _front(
        self,
        app: web.Application,
        table: ConnectionTable,
        options: WebOptions,
        ssl_context: ssl.SSLContext | None,
        runners: list[web.AppRunner],
        handle_signals: bool,
    ) -> Front:
        """``app`` set up behind a front of its own (its runner added to ``runners``)."""
        loop = asyncio.get_running_loop()
        # aiohttp's keep-alive close is only a backstop: the idle deadline fires first, and counts.
        keepalive = options.idle_timeout + options.header_timeout
        runner: web.AppRunner | None = None

        def make_handler() -> FrontHandler:
            assert runner is not None and runner.server is not None
            return FrontHandler(runner.server, loop=loop, keepalive_timeout=keepalive, access_log_class=NoAccessLog, lingering_time=LINGER)

        front = Front(table, options, make_handler, loop, ssl_context, self.bodies.count, self.accept_errors)
        app.middlewares.insert(0, front.middleware())
        # A connection closed by a deadline cancels its handler, rather than failing its read with
        # a traceback in the log for every slow client.
        runner = web.AppRunner(
            app,
            handle_signals=handle_signals,
            access_log=None,
            shutdown_timeout=SHUTDOWN_GRACE,
            keepalive_timeout=keepalive,
            handler_cancellation=True,
        )
        await runner.setup()
        runners.append(runner)
        return front


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
