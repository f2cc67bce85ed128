"""Where a new connection waits for its first byte while every regular slot is taken.

A client speaks first (an HTTP request, a TLS ClientHello), and a probe or a scraper does so as
it connects; a connection that has said nothing has nothing to be served yet. While the table is
full, such a connection costs no slot: its bare socket waits here, watched for readability, and
is admitted (as a client that has spoken) once its first byte arrives. A flood of silent
connections then only passes through here and never pushes out a request.

Bounded: at most ``LOBBY_SIZE`` sockets wait, each at most ``LOBBY_WAIT`` seconds; past the
wait a socket is closed, and when the lobby is full the one waiting longest of the address that
holds the most waiting sockets (counted as ``full`` both ways). A flood of silent connections
from a few addresses, hundreds a second, so turns over its own sockets only: a probe from another
address whose request follows its connection by a moment is not pushed out first. No TLS state
and no aiohttp protocol exist for a waiting socket: it costs a descriptor.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Callable

LOBBY_SIZE = 64  # sockets waiting at once; beyond it the oldest is closed
# Far above the time a client takes between connecting and sending its request, far below any
# deadline a probe or a scraper keeps.
LOBBY_WAIT = 1.0


class Lobby:
    """Silent new sockets, oldest first, until they speak (``admit``) or are closed (``refused``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        admit: Callable[[socket.socket, str | None], None],
        refused: Callable[[], None],
        size: int = LOBBY_SIZE,
        wait: float = LOBBY_WAIT,
    ) -> None:
        self.loop, self.admit, self.refused, self.size, self.wait = loop, admit, refused, size, wait
        self._waiting: dict[socket.socket, tuple[str | None, asyncio.TimerHandle]] = {}  # insertion-ordered

    def __len__(self) -> int:
        return len(self._waiting)

    def hold(self, sock: socket.socket, address: str | None) -> None:
        if len(self._waiting) >= self.size:
            self._close(self._victim())
        timer = self.loop.call_later(self.wait, self._close, sock)
        self._waiting[sock] = (address, timer)
        self.loop.add_reader(sock.fileno(), self._spoke, sock)

    def close(self) -> None:
        for sock in list(self._waiting):
            self._release(sock)
            sock.close()

    def _victim(self) -> socket.socket:
        """The socket waiting longest of the address holding the most waiting sockets."""
        held = Counter(address for address, _ in self._waiting.values())
        heaviest = max(held, key=held.__getitem__)  # the first to reach the most: ties go by age
        return next(sock for sock, (address, _) in self._waiting.items() if address == heaviest)

    def _spoke(self, sock: socket.socket) -> None:
        address = self._release(sock)
        self.admit(sock, address)

    def _close(self, sock: socket.socket) -> None:
        if sock in self._waiting:
            self._release(sock)
            sock.close()
            self.refused()

    def _release(self, sock: socket.socket) -> str | None:
        address, timer = self._waiting.pop(sock)
        timer.cancel()
        self.loop.remove_reader(sock.fileno())
        return address
