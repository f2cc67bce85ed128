"""Helpers for the hook tests: a recording HTTP sink, a real exporter process (loopback only), scripts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.exposition import Samples, samples, value
from tests.support.paths import ROOT
from tests.support.ports import free_port


def tiny_lightning_module() -> object:
    """A one-layer LightningModule (regression on 4 inputs) for the callback tests; needs
    lightning and torch, imported here so that collecting a test file does not."""
    import lightning
    import torch

    class Tiny(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def training_step(self, batch: tuple[object, object], batch_idx: int) -> object:
            x, y = batch
            return torch.nn.functional.mse_loss(self.linear(x), y)

        def configure_optimizers(self) -> object:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny()


def wait_until(condition: Callable[[], object], deadline: float = 20.0, what: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy (bounded; never a fixed sleep)."""
    end = time.monotonic() + deadline
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"{what} not met within {deadline}s")
        time.sleep(0.02)


class Sink:
    """Records every POSTed batch; answers ``status`` (200 by default), optionally after ``hold``."""

    def __init__(self, port: int = 0) -> None:
        self.batches: list[dict] = []
        self.profiles: list[dict] = []  # POST /api/v1/profiles
        self.headers: list[dict] = []
        self.status = 200
        self.hold = threading.Event()
        self.hold.set()  # cleared = requests wait (a slow exporter), bounded by hold_timeout
        self.hold_timeout = 10.0
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.hold.wait(sink.hold_timeout)
                doc = json.loads(raw)
                status = sink.status
                profile = self.path.endswith("/api/v1/profiles")
                with sink.lock:
                    if status == 200:
                        (sink.profiles if profile else sink.batches).append(doc)
                    sink.headers.append(dict(self.headers))
                accepted = 1 if profile else len(doc["steps"])
                answer = json.dumps({"accepted": accepted} if status == 200 else {"error": "no", "reason": "invalid"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def handle(self) -> None:
                try:
                    super().handle()
                except OSError:  # the client gave up waiting (the slow-exporter tests)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def steps(self, **match: object) -> list[dict]:
        with self.lock:
            return [s for b in self.batches if all(b.get(k) == v for k, v in match.items()) for s in b["steps"]]

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


class ExporterProcess:
    """`python -m exporter serve --simulate` on a loopback port, with /metrics helpers."""

    def __init__(self, tmp_path: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.log_path = tmp_path / f"exporter-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self._log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--simulate",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--npu-smi.interval",
                "5s",
                "--npu-smi.details=",
                *self.args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        wait_until(self._up, deadline=30, what=f"exporter on {self.url}")

    def _up(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def samples(self) -> Samples:
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as resp:
            return samples(resp.read().decode())

    def value(self, name: str, **labels: str) -> float | None:
        return value(self.samples(), name, **labels)

    def wait_value(self, name: str, expected: float, deadline: float = 20.0, **labels: str) -> None:
        wait_until(
            lambda: self.value(name, **labels) == expected, deadline, f"{name}{labels} == {expected} (last {self.value(name, **labels)})"
        )

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._log.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log.close()


def run_script(code: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (fork tests stay out of the pytest process)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=environment, cwd=ROOT)
