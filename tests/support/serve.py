"""A real `cann-exporter serve` process on 127.0.0.1, with faults injected through
CANN_SIM_FAULT_FILE (the simulator re-reads it on every call).

It listens on port 0 and the port is read from its "listening" log line, which the exporter
writes only after the bind: no race with another process for a port picked in advance.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.exposition import Samples, samples
from tests.support.paths import ROOT

# logfmt (address=127.0.0.1:PORT) and JSON ("address": "127.0.0.1:PORT") alike.
LISTENING = re.compile(r'listening.*?address"?[=:]\s*"?127\.0\.0\.1:(\d+)')


class Exporter:
    """``launcher`` replaces ``python -m exporter`` (a privilege-dropping wrapper, or a module
    that starts the exporter with a fault built in: tests/support/stuck_exporter.py)."""

    def __init__(self, args: list[str], tmp_path: Path, env: dict[str, str] | None = None, launcher: list[str] | None = None) -> None:
        self._port: int | None = None
        self.fault_file = tmp_path / "faults"
        self.log_path = tmp_path / "exporter.log"
        environment = {**os.environ, "CANN_SIM_FAULT_FILE": str(self.fault_file), **(env or {})}
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [*(launcher or [sys.executable, "-m", "exporter"]), "serve", "--listen", "127.0.0.1:0", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=ROOT,
        )

    @property
    def port(self) -> int:
        """The port the exporter bound, from its log (needs the default info log level)."""
        end = time.monotonic() + 30
        while self._port is None:
            found = LISTENING.search(self.log_path.read_text(errors="replace"))
            if found:
                self._port = int(found.group(1))
            elif self.proc.poll() is not None or time.monotonic() > end:
                raise AssertionError(f"the exporter never logged its address; log:\n{self.log_path.read_text()[-3000:]}")
            else:
                time.sleep(0.05)
        return self._port

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def metrics(self) -> Samples:
        status, text = self.get("/metrics")
        assert status == 200
        return samples(text)

    def wait_for(self, condition: Callable[[dict], bool], deadline: float = 45.0) -> dict:
        """Poll /metrics until ``condition`` holds (bounded)."""
        end = time.monotonic() + deadline
        while True:
            assert self.proc.poll() is None, self.log_path.read_text()
            try:
                found = self.metrics()
                if condition(found):
                    return found
            except OSError:
                pass
            if time.monotonic() > end:
                raise AssertionError(f"condition not met in {deadline}s; log:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def fault(self, spec: str) -> None:
        self.fault_file.write_text(spec)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def terminate_within(self, seconds: float) -> int:
        """SIGTERM, then the exit code if the process ended within ``seconds`` (else it is
        killed and the test fails)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {seconds}s after SIGTERM; log:\n{self.log_path.read_text()[-3000:]}") from None
        finally:
            self._log.close()
