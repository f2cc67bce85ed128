"""The hooks' HTTP client against hostile answers from 127.0.0.1: a server that trickles its reply
a byte at a time, and one whose reply is far larger than any the exporter sends."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from exporter.hooks.transport import MAX_REPLY_BYTES, Transport

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@contextmanager
def answering(reply: Callable[[socket.socket], None]) -> Iterator[str]:
    """A one-connection-at-a-time server on 127.0.0.1 that reads a request, then calls ``reply``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    received = b""
                    while b"\r\n\r\n" not in received:
                        received += conn.recv(65536)
                    reply(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(10)
        listener.close()


def test_a_trickling_reply_is_cut_at_the_exchange_deadline():
    sent = []

    def trickle(conn: socket.socket) -> None:
        for byte in HEAD + b"Content-Length: 2\r\n\r\n{}":  # 60 bytes at 0.25 s: 15 s in all
            conn.sendall(bytes([byte]))
            sent.append(byte)
            time.sleep(0.25)

    with answering(trickle) as url:
        transport = Transport(url, None, timeout=1.0)
        with pytest.raises((OSError, http.client.HTTPException)):
            transport.post(b"{}")
        transport.close()
    # Cut long before the whole reply went out (each read alone was well within the timeout).
    assert len(sent) < len(HEAD) + 20


def test_a_reply_larger_than_the_cap_is_refused():
    def huge(conn: socket.socket) -> None:
        size = 64 * MAX_REPLY_BYTES
        conn.sendall(HEAD + f"Content-Length: {size}\r\n\r\n".encode())
        conn.sendall(b"x" * size)

    with answering(huge) as url:
        transport = Transport(url, None, timeout=5.0)
        with pytest.raises(http.client.HTTPException, match="reply longer than"):
            transport.post(b"{}")


def test_an_ordinary_reply_keeps_the_connection():
    def ok(conn: socket.socket) -> None:
        conn.sendall(HEAD + b'Content-Length: 11\r\n\r\n{"ok":true}')
        time.sleep(0.5)  # keep-alive: the client must not wait for the close

    with answering(ok) as url:
        transport = Transport(url, None, timeout=5.0)
        reply = transport.post(b"{}")
        assert (reply.status, reply.body) == (200, b'{"ok":true}')
        assert transport._conn is not None
        transport.close()
