"""Accept errors (EMFILE and the like) are counted and logged once per state change, and the
open-file limit is fitted to the connection cap at start.

The real case runs in a subprocess whose RLIMIT_NOFILE is lowered (the test process keeps
its own): idle clients exhaust the server's descriptors, and its log must say so once, not
once per failed accept().
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from exporter.web import guard
from exporter.web.fds import FD_RESERVE, plan
from exporter.web.guard import Front
from exporter.web.limits import ConnectionTable
from exporter.web.options import WebOptions

BOUND = 20.0


def emfile() -> OSError:
    return OSError(errno.EMFILE, "Too many open files")


def front() -> Front:
    options = WebOptions()
    return Front(ConnectionTable(options.max_connections, options.health_connections), options, lambda: None, asyncio.get_running_loop())


class FailingSocket(socket.socket):
    """A listening socket whose accept() fails with EMFILE while ``failing`` is set."""

    failing = True
    attempts = 0

    def accept(self):  # type: ignore[override]
        type(self).attempts += 1
        if self.failing:
            raise emfile()
        return super().accept()


async def test_bytes_waiting_in_a_connections_socket_mean_it_has_spoken():
    """A connection whose request the loop has not read yet is not silent: a talking newcomer
    at a full table must not evict it for one that never spoke (the rule's own victims)."""
    client, server = socket.socketpair()
    with client, server:
        server.setblocking(False)
        conn = guard.Connection(front(), server, "127.0.0.1")
        assert conn.silent()
        client.sendall(b"GET /metrics HTTP/1.1\r\n")
        deadline = time.monotonic() + BOUND
        while not guard._has_bytes(server):  # bounded: the bytes are in the socket once sendall returns
            assert time.monotonic() < deadline
        assert not conn.silent() and conn.heard
        assert server.recv(64) == b"GET /metrics HTTP/1.1\r\n"  # looked at, not read


async def test_the_acceptor_backs_off_counts_and_logs_once_per_state_change(caplog, monkeypatch):
    monkeypatch.setattr(guard, "ACCEPT_BACKOFF", 0.1)
    listener = FailingSocket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())  # pending in the backlog: always readable
    accepted: list[socket.socket] = []
    served = front()
    served.accepted = lambda sock, address: accepted.append(sock)
    with caplog.at_level(logging.INFO, logger="exporter.web"):
        stop = served.listen(listener)
        await asyncio.sleep(0.5)
        # A retry every backoff, not a spin: a handful of attempts in half a second.
        assert 2 <= FailingSocket.attempts <= 10 and served.accept_errors["emfile"] == FailingSocket.attempts
        FailingSocket.failing = False
        end = time.monotonic() + BOUND
        while not accepted:
            assert time.monotonic() < end
            await asyncio.sleep(0.02)
    stop()
    client.close()
    for sock in accepted:
        sock.close()
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept connections; pausing accept and retrying",
        "accepting connections again",
    ]


# --- a real EMFILE ------------------------------------------------------------------------------

SERVER = textwrap.dedent("""
    import asyncio, json, logging, resource, socket, sys
    from aiohttp import web
    from exporter.web.options import WebOptions
    from exporter.web.server import HttpServer

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    server = HttpServer(WebOptions(max_connections=1000))   # far above what 64 descriptors allow

    async def counts(request):
        return web.json_response(server.status().accept_errors)

    app = web.Application()
    app.router.add_get("/counts", counts)
    sock = socket.create_server(("127.0.0.1", 0), backlog=256)
    print(sock.getsockname()[1], flush=True)
    server.run(app, [sock])
""")


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=BOUND) as resp:
        return resp.read().decode()


def test_a_real_emfile_is_logged_once_and_counted(tmp_path):
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        port = int(proc.stdout.readline())
        clients = [socket.create_connection(("127.0.0.1", port), timeout=BOUND) for _ in range(100)]
        end = time.monotonic() + BOUND
        while "cannot accept connections" not in log_path.read_text():
            assert time.monotonic() < end and proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        time.sleep(1.0)  # several backoff periods of failing
        for client in clients:
            client.close()
        counts = dict(json.loads(get(port, "/counts")))
        assert counts["emfile"] >= 1
        text = log_path.read_text()
        assert text.count("cannot accept connections") == 1, text
        assert text.count("accepting connections again") == 1, text
        assert "Traceback" not in text and len(text.splitlines()) < 10, text
    finally:
        proc.terminate()
        proc.wait(timeout=BOUND)
        proc.stdout.close()


# --- the open-file limit against the cap -----------------------------------------------------------

DEFAULTS = WebOptions()
NEEDED = DEFAULTS.max_connections + DEFAULTS.health_connections + FD_RESERVE


@pytest.mark.parametrize(
    ("soft", "hard", "soft_limit", "cap"),
    [
        (8192, 8192, None, 256),  # the systemd unit: fits
        (resource.RLIM_INFINITY, resource.RLIM_INFINITY, None, 256),
        (256, 524288, NEEDED, 256),  # raised, within the hard limit
        (256, resource.RLIM_INFINITY, NEEDED, 256),
        (200, 300, 300, 300 - 8 - FD_RESERVE),  # raised to the hard limit, cap lowered
        (200, 200, None, 200 - 8 - FD_RESERVE),
        (64, 64, None, 1),  # never below one connection
    ],
)
def test_the_plan_fits_the_cap_to_the_limit(soft, hard, soft_limit, cap):
    planned = plan(DEFAULTS, soft, hard)
    assert (planned.soft_limit, planned.max_connections) == (soft_limit, cap)


FIT = textwrap.dedent("""
    import logging, resource, sys
    from exporter.web.fds import fit_open_files
    from exporter.web.options import WebOptions

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), int(sys.argv[2])))
    fitted = fit_open_files(WebOptions())
    print(fitted.max_connections, *resource.getrlimit(resource.RLIMIT_NOFILE))
""")


@pytest.mark.parametrize(
    ("soft", "hard", "expected", "logged"),
    [
        (100, 1000, f"256 {NEEDED} 1000", "raised the open-file limit"),
        (200, 200, f"{200 - 8 - FD_RESERVE} 200 200", "open-file limit too low for web.max_connections"),
    ],
)
def test_fit_open_files_in_a_process(soft, hard, expected, logged):
    if (
        resource.getrlimit(resource.RLIMIT_NOFILE)[1] not in (resource.RLIM_INFINITY,)
        and resource.getrlimit(resource.RLIMIT_NOFILE)[1] < hard
    ):
        pytest.skip("this process's hard limit is lower than the test needs")
    out = subprocess.run([sys.executable, "-c", FIT, str(soft), str(hard)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert logged in out and out.splitlines()[-1] == expected
