"""The listening sockets, bound before the server starts so the log names the real address.

Binding here rather than in aiohttp's run_app means "address in use" is known before
anything says "listening", and port 0 (any free port, for tests and side-by-side runs) is
logged as the port the kernel chose.
"""

from __future__ import annotations

import socket
from typing import Any

# Connections the kernel completes and holds until accept() takes them. Python's default (128)
# overflows under churn: a SYN dropped then is retried by the client after 1 s, 3 s, ..., so a
# probe on a new connection waits seconds for nothing. The kernel caps it at
# net.core.somaxconn (4096 since Linux 5.4, 128 before).
LISTEN_BACKLOG = 1024


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (empty: every interface, IPv6 and IPv4 where the host
    has both) and ``port``; every address of a name shares the first one's port. OSError as
    socket raises it (EADDRINUSE, EADDRNOTAVAIL, gaierror)."""
    if not host:
        if socket.has_dualstack_ipv6():
            return [socket.create_server(("", port), family=socket.AF_INET6, backlog=LISTEN_BACKLOG, dualstack_ipv6=True)]
        return [socket.create_server(("", port), backlog=LISTEN_BACKLOG)]
    sockets: list[socket.socket] = []
    try:
        for family, address in _addresses(host, port):
            if sockets:  # port 0: every address listens on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sockets.append(socket.create_server(address, family=family, backlog=LISTEN_BACKLOG))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _addresses(host: str, port: int) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    seen: list[tuple[socket.AddressFamily, tuple[Any, ...]]] = []
    for family, _, _, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
        if (family, address) not in seen and family in (socket.AF_INET, socket.AF_INET6):
            seen.append((family, address))
    return seen


def addresses(sockets: list[socket.socket]) -> str:
    """`127.0.0.1:9435`, `[::]:9435`: what the sockets listen on, comma-separated."""
    out = []
    for sock in sockets:
        host, port = sock.getsockname()[:2]
        out.append(f"[{host}]:{port}" if sock.family == socket.AF_INET6 else f"{host}:{port}")
    return ",".join(out)
