"""A real `cann-exporter serve` process on 127.0.0.1, with faults injected through
CANN_SIM_FAULT_FILE (the simulator re-reads it on every call)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.exposition import Samples, samples
from tests.support.ports import free_port


class Exporter:
    def __init__(self, args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.fault_file = tmp_path / "faults"
        self.log_path = tmp_path / "exporter.log"
        environment = {**os.environ, "CANN_SIM_FAULT_FILE": str(self.fault_file), **(env or {})}
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exporter", "serve", "--listen", f"127.0.0.1:{self.port}", *args],
            stdout=self._log, stderr=subprocess.STDOUT, env=environment,
        )

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
