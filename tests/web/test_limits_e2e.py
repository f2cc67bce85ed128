"""The listener's bounds on a real `cann-exporter serve --simulate`, set through its flags:
slowloris, a body that never arrives, idle keep-alive, a client that never reads its scrapes,
and the connection cap with /healthz still answering. Every wait is bounded.
"""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.exposition import value

pytestmark = pytest.mark.e2e

BOUND = 15.0
TINY = ["--web.header-timeout", "0.3s", "--web.body-timeout", "0.3s", "--web.idle-timeout", "0.3s", "--web.write-timeout", "0.3s"]
QUIET = ["--simulate", "healthy", "--no-hccn.enabled", "--npu-smi.details=usages"]


def connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(BOUND)
    sock.connect(("127.0.0.1", port))
    return sock


def until_closed(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection; a timeout fails the test."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    sock.close()
    return received


def counted(found: dict, name: str, **labels: str) -> float:
    return value(found, name, **labels) or 0


def test_deadlines_close_slow_and_stuck_clients(start):
    exporter = start(*QUIET, *TINY)
    exporter.wait_for(lambda f: value(f, "npu_devices") == 8)
    port = exporter.port

    slowloris = connect(port)
    slowloris.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nX-Slow: a")
    assert until_closed(slowloris) == b""

    short_body = connect(port)
    short_body.sendall(b"POST /api/v1/steps HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    assert until_closed(short_body) == b""

    kept_alive = connect(port)
    kept_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert until_closed(kept_alive).startswith(b"HTTP/1.1 200")  # answered, then closed when idle

    # Scrapes pipelined through a small window, none read: more than the kernel's socket buffers
    # hold (~30 KB each, 4 MB at most), so the rest waits in the exporter's memory until dropped.
    never_reads = connect(port, rcvbuf=4096)
    never_reads.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nAccept-Encoding: identity\r\n\r\n" * 400)

    found = exporter.wait_for(
        lambda f: (
            counted(f, "cann_exporter_http_timeouts_total", kind="write") >= 1
            and counted(f, "cann_exporter_http_timeouts_total", kind="header") >= 1
            and counted(f, "cann_exporter_http_timeouts_total", kind="body") >= 1
            and counted(f, "cann_exporter_http_timeouts_total", kind="idle") >= 1
            # none left but, perhaps, a scrape's own (the count is read once a second)
            and (value(f, "cann_exporter_http_connections") or 0) <= 1
        ),
        deadline=BOUND,
    )
    assert value(found, "cann_exporter_http_max_connections") == 256
    never_reads.close()
    assert exporter.get("/healthz")[0] == 200
    # Counted, not logged: a flood of slow clients cannot flood the log.
    assert "level=error" not in exporter.log_path.read_text()


def test_over_the_cap_health_still_answers(start):
    exporter = start(*QUIET, "--web.max-connections", "4", "--web.health-connections", "2")
    exporter.wait_for(lambda f: value(f, "npu_devices") == 8)
    assert exporter.get("/readyz")[0] == 200
    # Every regular slot held by a client that never reads its scrapes: its handler waits on it
    # (never made to room before the write deadline), whatever the machine's speed.
    idle = [connect(exporter.port, rcvbuf=4096) for _ in range(4)]
    for sock in idle:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nAccept-Encoding: identity\r\n\r\n" * 40)
    end = time.monotonic() + BOUND
    while (status := exporter.get("/metrics")[0]) != 503:  # bounded: until the cap is in force
        assert time.monotonic() < end, status
        time.sleep(0.05)
    assert exporter.get("/healthz") == (200, "ok\n")
    assert exporter.get("/readyz")[0] == 200
    for sock in idle:
        sock.close()
    while exporter.get("/metrics")[0] != 200:  # until the server has seen them close
        assert time.monotonic() < end + BOUND
        time.sleep(0.05)
    exporter.wait_for(
        lambda f: (
            counted(f, "cann_exporter_http_connections_rejected_total", reason="health_only") >= 1
            # the idle ones gone: none left but, perhaps, a scrape's own (the count is read once a second)
            and (value(f, "cann_exporter_http_connections") or 0) <= 1
        ),
        deadline=BOUND,
    )
