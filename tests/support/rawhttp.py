"""Raw HTTP over asyncio streams against an in-process HttpServer, for tests that must see
exactly what the server sends."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from exporter.web.options import WebOptions
from exporter.web.server import HttpServer

BOUND = 10.0  # seconds any single read or wait may take (generous)


@asynccontextmanager
async def serve_app(
    app: web.Application, options: WebOptions, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[HttpServer, int]]:
    """``app`` behind the exporter's HttpServer on a free 127.0.0.1 port, stopped on exit."""
    server = HttpServer(options)
    sock = socket.create_server(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(app, [sock], ssl_context, handle_signals=False))
    try:
        yield server, sock.getsockname()[1]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def connect(port: int, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A new connection to 127.0.0.1:``port``; ``rcvbuf`` set before connecting, so the
    receive window is small from the start."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), BOUND)
    return await asyncio.open_connection(sock=sock)


async def until(condition: Callable[[], bool], what: str = "condition") -> None:
    """Bounded poll of the server's state."""
    end = asyncio.get_running_loop().time() + BOUND
    while not condition():
        assert asyncio.get_running_loop().time() < end, f"{what} not met in time"
        await asyncio.sleep(0.02)


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What arrives until the server closes (EOF or reset); fails if it never does."""
    received = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), BOUND):
            received += chunk
    except ConnectionResetError:
        pass
    return received
