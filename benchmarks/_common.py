"""Helpers shared by the exporter benchmarks: processes, ports, HTTP, percentiles, results.

Everything here is bounded: every wait has a deadline, every process started is stopped
(terminate, then kill) when its context exits, also on errors. Only 127.0.0.1 is used.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks._replay import replay_tools

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

# What Prometheus 2.x sends on a scrape (scrape.go acceptHeader, gzip on by default).
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
    "User-Agent": "Prometheus/2.45.0",
}
PLAIN_HEADERS = {"Accept-Encoding": "identity", "User-Agent": "cann-exporter-bench"}


class BenchError(RuntimeError):
    """A benchmark could not measure what it set out to (the runner notes it and moves on)."""


# --- ports and processes ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Process:
    """A child process with its output in a temporary log file; ``stop()`` always reaps it."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self._log = tempfile.NamedTemporaryFile(prefix=f"bench-{name}-", suffix=".log", delete=False)
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=REPO,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self._log.name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        if not self.alive():
            raise BenchError(f"{self.name} exited with status {self.popen.returncode}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(5)
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log.name)


@contextlib.contextmanager
def started(name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[Process]:
    proc = Process(name, argv, env)
    try:
        yield proc
    finally:
        proc.stop()


def wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.1, procs: Sequence[Process] = ()) -> float:
    """Poll ``check`` until true; seconds waited. BenchError on timeout or a process dying."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        for proc in procs:
            proc.check_alive()
        try:
            if check():
                return time.monotonic() - start
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() >= deadline:
            tails = "".join(f"\n--- {p.name} log ---\n{p.log_tail()}" for p in procs)
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}{tails}")
        time.sleep(every)


# --- HTTP -----------------------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:port (http.client, no pooling layers)."""

    def __init__(self, port: int, timeout: float = 10.0, extra_headers: Mapping[str, str] | None = None) -> None:
        self.port = port
        self.timeout = timeout
        self.reconnects = 0
        self.extra_headers = dict(extra_headers or {})  # sent with every request (e.g. Authorization)
        self._conn = http.client.HTTPConnection(HOST, port, timeout=timeout)

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body, seconds from sending the request to the last body byte)."""
        for attempt in (0, 1):
            try:
                start = time.perf_counter()
                self._conn.request("GET", path, headers={**(headers or PLAIN_HEADERS), **self.extra_headers})
                response = self._conn.getresponse()
                body = response.read()
                elapsed = time.perf_counter() - start
                if response.will_close:
                    self._reset()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, body, elapsed
            except (ConnectionError, http.client.HTTPException):
                self._reset()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def text(self, path: str) -> str:
        status, _, body, _ = self.get(path)
        if status != 200:
            raise http.client.HTTPException(f"GET {path}: HTTP {status}")
        return body.decode("utf-8", errors="replace")

    def _reset(self) -> None:
        self.reconnects += 1
        self._conn.close()
        self._conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)

    def close(self) -> None:
        self._conn.close()


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of the metric ``name`` in exposition text."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out.append((dict(sample.labels), float(sample.value)))
    return out


def sample_value(text: str, name: str, **labels: str) -> float | None:
    for got, value in samples(text, name):
        if all(got.get(k) == v for k, v in labels.items()):
            return value
    return None


def count_samples(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


# --- the exporter and node_exporter as real processes ----------------------------------------------

SIM_MODEL, SIM_PROCESSES_PER_DIE, EXPECTED_CHIPS, EXPECTED_PROCESSES = "a3", 4, 16, 64


def exporter_argv(port: int, *extra: str, network: bool = False) -> list[str]:
    # npu-smi and hccn_tool replay the simulator's answers (_replay.py): as cheap as the native
    # tools, so the machine's CPU goes to the exporters compared. The core exporter's figures
    # (16 chips, 64 processes) leave the hccn_tool network source out so the series match that
    # case; network=True keeps it (the a3 node as shipped: about 1,800 samples with the network's).
    npu_smi, hccn_tool = replay_tools(SIM_MODEL)
    return [
        sys.executable,
        "-m",
        "exporter",
        "serve",
        "--npu-smi",
        npu_smi,
        "--hccn-tool",
        hccn_tool,
        "--listen",
        f"{HOST}:{port}",
        "--hccn.enabled" if network else "--no-hccn.enabled",
        *extra,
    ]


_SERVE_FLAGS: frozenset[str] | None = None


def serve_flags() -> frozenset[str]:
    """The long flags `cann-exporter serve --help` lists (read once): options other engineers
    add or rename are detected at run time instead of assumed."""
    global _SERVE_FLAGS
    if _SERVE_FLAGS is None:
        try:
            out = subprocess.run(
                [sys.executable, "-m", "exporter", "serve", "--help"],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=REPO,
                env=exporter_env(),
                check=False,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            raise BenchError(f"`serve --help` failed: {exc}") from exc
        if out.returncode != 0:
            raise BenchError(f"`serve --help` exited with {out.returncode}: {out.stderr.strip()[-500:]}")
        _SERVE_FLAGS = frozenset(re.findall(r"--[a-z][a-z0-9_.-]*[a-z0-9]", out.stdout))
    return _SERVE_FLAGS


def has_flag(flag: str) -> bool:
    return flag in serve_flags()


def exporter_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANN_EXPORTER_", "CANN_SIM_"))}
    env["CANN_SIM_PROCESSES"] = str(SIM_PROCESSES_PER_DIE)
    return env


@contextlib.contextmanager
def ingest_exporter() -> Iterator[tuple[Process, Client]]:
    """The exporter for the hooks' benchmarks: npu-smi details off (only its ingest is measured),
    answering /healthz."""
    port = free_port()
    with started("exporter", [*exporter_argv(port), "--npu-smi.details="], exporter_env()) as proc:
        client = Client(port)
        try:
            wait_until("/healthz", lambda: client.get("/healthz")[0] == 200, 60, procs=[proc])
            yield proc, client
        finally:
            client.close()


def wait_exporter_complete(proc: Process, client: Client, timeout: float = 90.0) -> dict[str, float]:
    """Wait for /readyz, then until the details and all 16 chips / 64 processes are served."""
    timings = {"readyz_seconds": wait_until("/readyz", lambda: client.get("/readyz")[0] == 200, timeout, procs=[proc])}

    def complete() -> bool:
        text = client.text("/metrics")
        details = sample_value(text, "cann_exporter_source_runs_total", source="npu_smi_details") or 0
        up = [v for _, v in samples(text, "npu_up")]
        return (
            details >= 1
            and len(up) == EXPECTED_CHIPS
            and all(v == 1 for v in up)
            and len(samples(text, "npu_aivector_utilization_ratio")) == EXPECTED_CHIPS
            and len(samples(text, "npu_process_memory_bytes")) == EXPECTED_PROCESSES
        )

    timings["complete_seconds"] = timings["readyz_seconds"] + wait_until(
        "all details (16 chips, 64 processes)", complete, timeout, every=0.2, procs=[proc]
    )
    return timings


NETWORK_SOURCES = ("hccn_link", "hccn_stat", "hccn_bandwidth", "hccn_optical")


def wait_network_complete(proc: Process, client: Client, timeout: float = 120.0) -> dict[str, float]:
    """wait_exporter_complete, then until the simulated hccn_tool's fast and slow reads have
    each run once (the slow ones take ~15 s on 2 cores) and the sample count is steady."""
    timings = wait_exporter_complete(proc, client, timeout)
    last = [-1]

    def complete() -> bool:
        text = client.text("/metrics")
        ran = all((sample_value(text, "cann_exporter_source_runs_total", source=s) or 0) >= 1 for s in NETWORK_SOURCES)
        count, last[0] = last[0], count_samples(text)
        return ran and count == last[0]

    timings["network_complete_seconds"] = timings["complete_seconds"] + wait_until(
        "the network (hccn_tool) sources", complete, timeout, every=0.5, procs=[proc]
    )
    return timings


def node_exporter_binary(notes: list[str]) -> str:
    """The node_exporter binary; installs the Debian package once if it is missing and we are root."""
    for name in ("prometheus-node-exporter", "node_exporter"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("BENCH_NO_APT") or not shutil.which("apt-get") or os.geteuid() != 0:
        raise BenchError("prometheus-node-exporter not found; install it: apt-get install -y prometheus-node-exporter")
    notes.append("prometheus-node-exporter was missing; installed with apt-get before measuring")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (
        ["apt-get", "install", "-y", "prometheus-node-exporter"],
        ["sh", "-c", "apt-get update && apt-get install -y prometheus-node-exporter"],
    ):
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=True)
            break
    found = shutil.which("prometheus-node-exporter")
    if not found:
        raise BenchError("apt-get install -y prometheus-node-exporter failed")
    return found


def node_exporter_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (subprocess.SubprocessError, OSError):
        return "unknown"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def node_exporter_argv(binary: str, port: int) -> list[str]:
    """The package's default collectors, listening on 127.0.0.1 only."""
    return [binary, f"--web.listen-address={HOST}:{port}"]


# --- numbers ---------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in 0..100."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or baseline is None or baseline == 0 or math.isnan(value) or math.isnan(baseline):
        return None
    return value / baseline


def figure(
    name: str,
    value: float | None,
    unit: str,
    *,
    baseline_name: str = "",
    baseline: float | None = None,
    goal: str = "",
    meets_goal: bool | None = None,
    ratio_value: float | None = None,
    note: str = "",
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "value": value, "unit": unit}
    if baseline_name:
        out["baseline_name"] = baseline_name
        out["baseline"] = baseline
        out["ratio"] = ratio_value if ratio_value is not None else ratio(value, baseline)
    if goal:
        out["goal"] = goal
        out["meets_goal"] = meets_goal
    if note:
        out["note"] = note
    return out


def rounded(value: Any, digits: int = 4) -> Any:
    """Round floats (recursively) to ``digits`` significant digits for readable reports."""
    if isinstance(value, float):
        if value == 0 or math.isnan(value) or math.isinf(value):
            return value
        return round(value, max(0, digits - 1 - int(math.floor(math.log10(abs(value))))))
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    return value


def latency_summary(seconds: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p99/mean/min/max in milliseconds of a list of latencies in seconds."""
    ms = [v * 1000 for v in seconds]
    if not ms:
        return {"scrapes": 0}
    return {
        "scrapes": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }


def body_info(status: int, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    import gzip

    text = gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body
    return {
        "status": status,
        "bytes_on_wire": len(body),
        "bytes_uncompressed": len(text),
        "samples": count_samples(text.decode("utf-8", errors="replace")),
        "content_type": headers.get("content-type", ""),
        "content_encoding": headers.get("content-encoding", "identity"),
    }


def scrape_orders(names: Sequence[str], index: int) -> list[str]:
    """The order of round ``index``: every rotation of the targets, then every rotation of
    them reversed, so each target is first, middle and last equally often (two targets:
    a b, b a, b a, a b)."""
    n = len(names)
    base = list(names) if (index // n) % 2 == 0 else list(names)[::-1]
    k = index % n
    return base[k:] + base[:k]


def scrape_interleaved(
    clients: Mapping[str, Client], headers: Mapping[str, str], scrapes: int, warmup: int, path: str = "/metrics"
) -> dict[str, dict[str, Any]]:
    """``warmup`` + ``scrapes`` rounds; each round scrapes every target once, in the order of
    :func:`scrape_orders`; per target the latency summary of the timed rounds and what the
    first round's body looked like."""
    latencies: dict[str, list[float]] = {name: [] for name in clients}
    info: dict[str, dict[str, Any]] = {name: {} for name in clients}
    names = list(clients)
    for index in range(warmup + scrapes):
        for name in scrape_orders(names, index):
            status, got_headers, body, seconds = clients[name].get(path, headers)
            if status != 200:
                raise BenchError(f"{name} {path} answered HTTP {status}")
            if index >= warmup:
                latencies[name].append(seconds)
            elif index == 0:
                info[name] = body_info(status, got_headers, body)
    return {name: {**latency_summary(values), **info[name]} for name, values in latencies.items()}


# --- the static-bytes floor: the same body, from memory, by a bare aiohttp app ----------------------

# Headers aiohttp sets itself on every response: not copied from the captured one.
_OWN_HEADERS = frozenset({"date", "server", "content-length", "connection", "keep-alive", "transfer-encoding"})


@contextlib.contextmanager
def static_server(bodies: Mapping[str, tuple[Mapping[str, str], Mapping[str, str], bytes]]) -> Iterator[int]:
    """A bare aiohttp app in a child process on 127.0.0.1 serving, on GET /metrics, the body
    captured for the request's (Accept, Accept-Encoding) with the captured response headers;
    404 for any other header pair. ``bodies``: name -> (request headers, response headers,
    body). Yields its port; the process is stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="bench-static-") as tmp:
        entries = []
        for index, (name, (request_headers, response_headers, body)) in enumerate(bodies.items()):
            path = Path(tmp) / f"body-{index}"
            path.write_bytes(body)
            entries.append(
                {
                    "name": name,
                    "accept": request_headers.get("Accept", ""),
                    "accept_encoding": request_headers.get("Accept-Encoding", ""),
                    "headers": {k: v for k, v in response_headers.items() if k.lower() not in _OWN_HEADERS},
                    "body_file": str(path),
                }
            )
        manifest = Path(tmp) / "manifest.json"
        manifest.write_text(json.dumps({"bodies": entries}), encoding="utf-8")
        port = free_port()
        with started("static-bytes", [sys.executable, "-m", "benchmarks._static_server", str(manifest), str(port)]) as proc:
            probe = Client(port)
            try:
                wait_until("the static-bytes server", lambda: probe.get("/healthz")[0] == 200, 30, procs=[proc])
                for name, (request_headers, _, body) in bodies.items():
                    status, _, got, _ = probe.get("/metrics", request_headers)
                    if status != 200 or got != body:
                        raise BenchError(f"the static-bytes server does not serve the {name} body as captured (HTTP {status})")
            finally:
                probe.close()
            yield port


def capture(client: Client, headers: Mapping[str, str], path: str = "/metrics") -> tuple[dict[str, str], bytes]:
    """The response headers and body of one GET (HTTP 200 required)."""
    status, got_headers, body, _ = client.get(path, headers)
    if status != 200:
        raise BenchError(f"GET {path} answered HTTP {status}")
    return got_headers, body


def main(run: Callable[[], dict[str, Any]]) -> None:
    """`python -m benchmarks.<name>`: run one benchmark, print its figures and the raw JSON."""
    result = run()
    print(f"== {result.get('title', '')}")
    for fig in result.get("figures", []):
        line = f"{fig['name']}: {fig.get('value')} {fig.get('unit', '')}"
        if "baseline" in fig:
            line += f" | {fig['baseline_name']}: {fig['baseline']} | ratio {fig.get('ratio')}"
        if "goal" in fig:
            line += f" | goal {fig['goal']}: {'met' if fig.get('meets_goal') else 'NOT met'}"
        print(line)
    print(json.dumps(result, indent=2, default=str))
