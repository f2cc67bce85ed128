"""Hostile inputs as real files and local servers, and commands run in a subprocess with their
peak memory watched."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs": ``width`` aliases per level, ``width ** levels`` strings expanded
    (the default is 387 million from about 600 bytes)."""
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def symlink(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    peak_rss: int  # bytes, sampled every 20 ms
    seconds: float


def run_watched(args: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> Ran:
    """``python -m exporter ARGS`` to its end (killed after ``timeout``), sampling its RSS."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    watched = psutil.Process(proc.pid)
    peak = 0
    try:
        while proc.poll() is None and time.monotonic() - start < timeout:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=30)
    return Ran(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), peak, time.monotonic() - start)


# --- hostile servers on 127.0.0.1 --------------------------------------------------------------


@contextlib.contextmanager
def hostile_server(behaviour: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 answering every GET and POST with ``behaviour``;
    yields its base URL and stops it (and its handler threads) afterwards."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's names)
            self._answer()

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(min(length, 1 << 20))
            self._answer()

        def _answer(self) -> None:
            try:
                behaviour(self)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up, as it should

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def trickle(every: float = 0.5, limit: int = 240) -> Callable[[BaseHTTPRequestHandler], None]:
    """Headers and body one byte at a time, ``every`` seconds apart (at most ``limit`` bytes)."""

    def behave(handler: BaseHTTPRequestHandler) -> None:
        data = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n" + b"#" * 1000
        for byte in data[:limit]:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)
        handler.close_connection = True

    return behave


def body(
    content: bytes | Callable[[], Iterator[bytes]], content_type: str = "application/json", length: int | None = None
) -> Callable[[BaseHTTPRequestHandler], None]:
    """A 200 answer with ``content``: bytes, or a generator of chunks streamed with the
    Content-Length ``length`` announced, or without one (the end is the connection's close)."""

    def behave(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        if isinstance(content, bytes):
            handler.send_header("Content-Length", str(len(content)))
            handler.end_headers()
            handler.wfile.write(content)
            return
        handler.send_header("Content-Length", str(length)) if length is not None else handler.send_header("Connection", "close")
        handler.end_headers()
        for chunk in content():
            handler.wfile.write(chunk)
        handler.close_connection = True

    return behave
