"""Issue 45 for exporter_abuse: every budget against one address. Three parts, each with an
exporter process of its own and a baseline window measured just before by the same client code
(the hostile traffic from benchmarks/_abuse_load.py, a process of its own):

- handshake hog: TLS /healthz probes from 127.0.0.2 on new connections (every 0.25 s, 8 s
  deadline as measured in the issue), quiet, then beside 64 connections from 127.0.0.1 that each
  send the first 6 bytes of a ClientHello and stall, renewed every 8 s. Counted: p99 and the
  probes over the kubelet's 1 s.
- flood on the scraper's address: from 127.0.0.1, a keep-alive scraper (every second), the
  training hooks' keep-alive sender (exporter/hooks/transport.py, every second, from a thread),
  and probes on new connections (every second, 1 s deadline) to the main port and, where `serve`
  has it, to the health listener (--web.health-listen); quiet, then beside new silent
  connections from 127.0.0.1 at 300 a second, each held 1 s. No basic auth (the case where the
  scraper's idle connection counted as waiting). Counted: failed requests of each.
- cold start with guessers: a user of bcrypt cost 14; a keep-alive scraper starting with the
  exporter, alone (the baseline), then on a fresh exporter together with 4 guessers (each a
  wrong password every 0.5 s on a new connection, not waiting for the answers). The scraper
  gives each scrape up after half of one cost-14 check as timed here (and scrapes again as
  often): its first check outlasts its timeout on any machine, as a cold start's queue outlasts
  Prometheus' 10 s on a loaded node. Counted: 429s with the correct password, and failed
  scrapes after the first 200.

Each part is skipped with a note when `serve --help` lacks what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import http.client
import ipaddress
import json
import ssl
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt

from benchmarks import _common as c
from benchmarks._rawhttp import HOST, Connection, basic_auth, request_bytes
from exporter.hooks.transport import Transport

HOG_QUIET, HOG_SECONDS = 4.0, 12.0
FLOOD_QUIET, FLOOD_SECONDS, FLOOD_RATE = 6.0, 16.0, 300.0
COLD_ALONE, COLD_SECONDS = 12.0, 24.0
KUBELET_TIMEOUT = 1.0
PROBE = request_bytes("GET", "/healthz", {"Connection": "close", "User-Agent": "kube-probe/1.29"})


@contextlib.contextmanager
def load(config: dict[str, Any], tmp: Path, name: str) -> Iterator[dict[str, Any]]:
    """The hostile traffic of ``config`` running; yields the dict its counts land in at the end."""
    out = tmp / f"load-{name}"
    out.mkdir()
    (tmp / f"{name}.json").write_text(json.dumps({"max_seconds": 120, **config}), encoding="utf-8")
    traffic: dict[str, Any] = {}
    with c.started(f"load-{name}", [sys.executable, "-m", "benchmarks._abuse_load", str(tmp / f"{name}.json"), str(out)]) as proc:
        c.wait_until(f"the {name} load to start", lambda: (out / "ready").exists(), 30, every=0.05, procs=[proc])
        try:
            yield traffic
        finally:
            (out / "stop").write_text("stop\n")
            with contextlib.suppress(c.BenchError):
                c.wait_until(f"the {name} load to stop", lambda: not proc.alive(), 20)
    if (out / "result.json").exists():
        traffic.update(json.loads((out / "result.json").read_text()))


@contextlib.contextmanager
def exporter(port: int, *extra: str, tls: ssl.SSLContext | None = None) -> Iterator[c.Process]:
    with c.started("cann-exporter", [*c.exporter_argv(port, *extra), "--npu-smi.details="], c.exporter_env()) as proc:
        if tls is None:
            client = c.Client(port)
            try:
                c.wait_until("/healthz", lambda: client.get("/healthz")[0] == 200, 60, procs=[proc])
            finally:
                client.close()
        else:
            c.wait_until("TLS /healthz", lambda: asyncio.run(_tls_probe(port, tls, HOST, 5.0)) is not None, 60, procs=[proc])
        yield proc


def counts(port: int, prefix: str = "cann_exporter_http_connections_rejected_total") -> dict[str, float]:
    client = c.Client(port)
    try:
        return {dict(labels).get("reason", ""): value for labels, value in c.samples(client.text("/metrics"), prefix)}
    except (OSError, c.BenchError):
        return {}
    finally:
        client.close()


# --- the handshake hog -------------------------------------------------------------------------


def self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "server.crt", tmp / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


async def _tls_probe(port: int, ctx: ssl.SSLContext, source: str, deadline: float) -> float | None:
    """Seconds to a TLS GET /healthz answered 200 on a new connection, or None."""
    started = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(HOST, port, ssl=ctx, server_hostname="localhost", local_addr=(source, 0)), deadline
        )
        writer.write(PROBE)
        head = await asyncio.wait_for(reader.read(12), max(0.01, deadline - (time.perf_counter() - started)))
        return time.perf_counter() - started if head.startswith(b"HTTP/1.1 200") else None
    except (OSError, asyncio.TimeoutError, ssl.SSLError):
        return None
    finally:
        if writer is not None:
            writer.transport.abort()


async def _tls_window(port: int, ctx: ssl.SSLContext, seconds: float) -> list[float | None]:
    out: list[float | None] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        began = time.monotonic()
        out.append(await _tls_probe(port, ctx, "127.0.0.2", 8.0))
        await asyncio.sleep(max(0.0, 0.25 - (time.monotonic() - began)))
    return out


def _probe_summary(window: list[float | None], failed_as: float) -> dict[str, Any]:
    seconds = [s if s is not None else failed_as for s in window]
    return {**c.latency_summary(seconds), "failed": window.count(None), "over_1s": sum(s > KUBELET_TIMEOUT for s in seconds)}


def handshake_hog(tmp: Path) -> dict[str, Any]:
    cert, key = self_signed(tmp)
    (tmp / "tls.yml").write_text(f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n", encoding="utf-8")
    ctx = ssl.create_default_context(cafile=str(cert))
    port = c.free_port()
    with exporter(port, "--web.config.file", str(tmp / "tls.yml"), tls=ctx):
        quiet = asyncio.run(_tls_window(port, ctx, HOG_QUIET))
        hog_config = {"port": port, "tls_hog": 64, "tls_hog_source": HOST, "tls_hog_renew": 8.0}
        with load(hog_config, tmp, "hog") as traffic:
            time.sleep(1.0)  # the 64 connected and stalled
            hog = asyncio.run(_tls_window(port, ctx, HOG_SECONDS))
    return {"quiet": _probe_summary(quiet, 8.0), "hog": _probe_summary(hog, 8.0), "traffic": traffic}


# --- the flood on the scraper's address ----------------------------------------------------------


class CountedTransport(Transport):
    """The hooks' keep-alive transport, counting the connections it opens."""

    connects = 0

    def _connect(self) -> http.client.HTTPConnection:
        self.connects += 1
        return super()._connect()


class Hooks(threading.Thread):
    """The training hooks' sender (exporter/hooks/transport.py) posting a step every second."""

    def __init__(self, port: int) -> None:
        super().__init__(name="hooks", daemon=True)
        self.transport = CountedTransport(f"http://{HOST}:{port}", None, 10.0)
        self.results: list[str] = []
        self.until = 0.0

    def run(self) -> None:
        while time.monotonic() < self.until:
            step = {"end": time.time(), "duration": 0.05, "samples": 32, "phases": {"compute": 0.03}}
            body = json.dumps({"job_name": "bench-one-address", "rank": 0, "world_size": 1, "steps": [step]}).encode()
            try:
                self.results.append(str(self.transport.post(body).status))
            except Exception as exc:  # a failure is what is counted
                self.results.append(type(exc).__name__)
            time.sleep(1.0)


async def _flood_window(port: int, health_port: int | None, seconds: float, hooks: Hooks) -> dict[str, Any]:
    end = time.monotonic() + seconds
    scrape = request_bytes("GET", "/metrics", c.PROMETHEUS_HEADERS)
    scraper = Connection(port, HOST, timeout=10)
    results: dict[str, Counter[str]] = {"scrapes": Counter(), "probes_main": Counter(), "probes_health": Counter()}
    hooks_before, connects_before = len(hooks.results), hooks.transport.connects

    async def once(conn: Connection, raw: bytes, into: Counter[str]) -> None:
        try:
            status, _, _, _ = await conn.request(raw)
            into[str(status)] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
            into[type(exc).__name__] += 1

    async def probe(target: int, into: Counter[str]) -> None:
        conn = Connection(target, HOST, timeout=KUBELET_TIMEOUT)
        try:
            await asyncio.wait_for(once(conn, PROBE, into), KUBELET_TIMEOUT)
        except asyncio.TimeoutError:
            into["TimeoutError"] += 1
        finally:
            conn.close()

    try:
        await once(scraper, scrape, Counter())  # connected and served before the window
        while time.monotonic() < end:
            began = time.monotonic()
            jobs = [once(scraper, scrape, results["scrapes"]), probe(port, results["probes_main"])]
            if health_port is not None:
                jobs.append(probe(health_port, results["probes_health"]))
            await asyncio.gather(*jobs)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        reconnects = scraper.connects - 1
    finally:
        scraper.close()
    posts = Counter(hooks.results[hooks_before:])
    out: dict[str, Any] = {kind: dict(counter) for kind, counter in results.items()}
    out.update(scraper_reconnects=reconnects, hook_posts=dict(posts), hook_reconnects=hooks.transport.connects - connects_before)
    return out


def failed(counter: dict[str, int]) -> int:
    return sum(n for status, n in counter.items() if status != "200")


def flood(tmp: Path, notes: list[str]) -> dict[str, Any]:
    port = c.free_port()
    extra: list[str] = []
    health_port = None
    if c.has_flag("--web.health-listen"):
        health_port = c.free_port()
        extra = ["--web.health-listen", f"{HOST}:{health_port}"]
    else:
        notes.append("`serve --help` lists no --web.health-listen: the health listener's probes were not measured.")
    with exporter(port, *extra):
        hooks = Hooks(port)
        hooks.until = time.monotonic() + FLOOD_QUIET + FLOOD_SECONDS + 60
        hooks.start()
        try:
            quiet = asyncio.run(_flood_window(port, health_port, FLOOD_QUIET, hooks))
            before = counts(port)
            with load({"port": port, "flood_rate": FLOOD_RATE, "flood_source": HOST, "flood_hold": 1.0}, tmp, "flood") as traffic:
                flooded = asyncio.run(_flood_window(port, health_port, FLOOD_SECONDS, hooks))
            after = counts(port)
        finally:
            hooks.until = 0.0
            hooks.join(15)
            hooks.transport.close()
    flooded["rejected"] = {reason: after.get(reason, 0.0) - before.get(reason, 0.0) for reason in after}
    return {"quiet": quiet, "flood": flooded, "traffic": traffic}


# --- the cold start with guessers ----------------------------------------------------------------


async def _scraper(port: int, auth: str, seconds: float, every: float) -> list[tuple[float, str]]:
    """(seconds since the start, outcome) of a scrape every ``every`` s, each given up after as long."""
    raw = request_bytes("GET", "/metrics", {**c.PROMETHEUS_HEADERS, "Authorization": auth})
    conn = Connection(port, HOST, timeout=every)
    start = time.monotonic()
    out = []
    try:
        while time.monotonic() - start < seconds:
            began = time.monotonic()
            try:
                status, _, _, _ = await conn.request(raw)
                outcome = str(status)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                outcome = type(exc).__name__
            out.append((began - start, outcome))
            await asyncio.sleep(max(0.0, every - (time.monotonic() - began)))
    finally:
        conn.close()
    return out


def _cold_summary(scrapes: list[tuple[float, str]]) -> dict[str, Any]:
    outcomes = [o for _, o in scrapes]
    first = outcomes.index("200") if "200" in outcomes else len(outcomes)
    return {
        "scrapes": len(outcomes),
        "outcomes": dict(Counter(outcomes)),
        "correct_password_429": outcomes.count("429"),
        "failed_before_first_200": first,
        # never a 200: every scrape failed, the first check included
        "failed_after_first_200": sum(o != "200" for o in outcomes[first:]) if first < len(outcomes) else len(outcomes),
        "first_200_at_s": scrapes[first][0] if first < len(scrapes) else None,
    }


def cold_start(tmp: Path) -> dict[str, Any]:
    password = "cold-start-" + str(time.time_ns())
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(14))
    began = time.perf_counter()
    bcrypt.checkpw(password.encode(), hashed)
    check = time.perf_counter() - began
    every = max(0.2, check / 2)
    (tmp / "auth.yml").write_text(f"basic_auth_users:\n  prometheus: '{hashed.decode()}'\n", encoding="utf-8")
    auth = basic_auth("prometheus", password)
    runs: dict[str, Any] = {"check_seconds": check, "scrape_every_seconds": every}
    port = c.free_port()
    with exporter(port, "--web.config.file", str(tmp / "auth.yml")):
        runs["alone"] = _cold_summary(asyncio.run(_scraper(port, auth, COLD_ALONE, every)))
    port = c.free_port()
    with exporter(port, "--web.config.file", str(tmp / "auth.yml")):
        guess = {"port": port, "guessers": 4, "guess_pause": 0.5, "user": "prometheus"}
        with load(guess, tmp, "guessers") as traffic:
            runs["guessers"] = _cold_summary(asyncio.run(_scraper(port, auth, COLD_SECONDS, every)))
    runs["traffic"] = traffic
    return runs


# --- the figures ---------------------------------------------------------------------------------


def run(tmp: Path, notes: list[str]) -> dict[str, Any]:
    """Figures, tables and raw results of the three parts (a part that cannot run: a note)."""
    figures: list[dict[str, Any]] = []
    tables: dict[str, list[dict[str, Any]]] = {}
    raw: dict[str, Any] = {}
    for name, part in (("handshake_hog", handshake_hog), ("flood", lambda t: flood(t, notes)), ("cold_start", cold_start)):
        sub = tmp / name
        sub.mkdir()
        try:
            raw[name] = part(sub)
        except (c.BenchError, OSError) as exc:
            notes.append(f"Issue 45 part {name} not measured: {exc}")
    if "handshake_hog" in raw:
        hog = raw["handshake_hog"]
        figures += [
            c.figure(
                "TLS /healthz p99 from another address beside a one-address handshake hog",
                hog["hog"].get("p99_ms"),
                "ms",
                baseline_name="quiet p99",
                baseline=hog["quiet"].get("p99_ms"),
                goal="< 1000 ms",
                meets_goal=(hog["hog"].get("p99_ms") or 1e9) < 1000,
            ),
            c.figure(
                "TLS probes over the kubelet's 1 s beside the hog",
                hog["hog"]["over_1s"],
                "probes",
                baseline_name="quiet",
                baseline=hog["quiet"]["over_1s"],
                ratio_value=hog["hog"]["over_1s"] - hog["quiet"]["over_1s"],
                goal="0",
                meets_goal=hog["hog"]["over_1s"] == 0,
                note=f"of {hog['hog'].get('scrapes', 0)} (quiet: of {hog['quiet'].get('scrapes', 0)}); ratio column: the difference",
            ),
        ]
        tables["TLS probes beside a handshake hog (64 stalled ClientHellos from 127.0.0.1)"] = [
            {"window": w, **hog[w]} for w in ("quiet", "hog")
        ]
    if "flood" in raw:
        fl = raw["flood"]
        # (label, key, most failures allowed: None for no goal); probes on a new connection each
        # are held to 9 of 10 on the health listener and reported without a goal on the main port.
        rows: list[tuple[str, str, float | None]] = [("keep-alive scrapes", "scrapes", 0), ("hook posts", "hook_posts", 0)]
        rows.append(("probes on the main port", "probes_main", None))
        if fl["flood"]["probes_health"]:
            rows.append(("probes on the health listener", "probes_health", 0.1))
        for label, key, allowed in rows:
            value, base, total = failed(fl["flood"][key]), failed(fl["quiet"][key]), sum(fl["flood"][key].values())
            quiet_total = sum(fl["quiet"][key].values())
            limit = None if allowed is None else int(allowed * total) if allowed < 1 else int(allowed)
            figures.append(
                c.figure(
                    f"{label} failed beside {FLOOD_RATE:g}/s silent connections from their address",
                    value,
                    "requests",
                    baseline_name="quiet",
                    baseline=base,
                    ratio_value=value - base,
                    goal="" if limit is None else f"<= {limit}",
                    meets_goal=None if limit is None else value <= limit,
                    note=f"of {total} (quiet: of {quiet_total}); ratio column: the difference",
                )
            )
        tables["Requests from 127.0.0.1 beside a 300/s silent flood from 127.0.0.1"] = [
            {
                "window": w,
                "scrapes": fl[w]["scrapes"],
                "scraper reconnects": fl[w]["scraper_reconnects"],
                "hook posts": fl[w]["hook_posts"],
                "hook reconnects": fl[w]["hook_reconnects"],
                "probes main": fl[w]["probes_main"],
                "probes health": fl[w]["probes_health"],
            }
            for w in ("quiet", "flood")
        ]
    if "cold_start" in raw:
        cold = raw["cold_start"]
        figures += [
            c.figure(
                "correct-password 429s at a cold start with 4 guessers (cost 14)",
                cold["guessers"]["correct_password_429"],
                "scrapes",
                baseline_name="scraper alone",
                baseline=cold["alone"]["correct_password_429"],
                ratio_value=cold["guessers"]["correct_password_429"] - cold["alone"]["correct_password_429"],
                goal="0",
                meets_goal=cold["guessers"]["correct_password_429"] == 0,
                note=f"of {cold['guessers']['scrapes']} (alone: of {cold['alone']['scrapes']}); ratio column: the difference",
            ),
            c.figure(
                "scrapes failed after the first check at a cold start with 4 guessers",
                cold["guessers"]["failed_after_first_200"],
                "scrapes",
                baseline_name="scraper alone",
                baseline=cold["alone"]["failed_after_first_200"],
                ratio_value=cold["guessers"]["failed_after_first_200"] - cold["alone"]["failed_after_first_200"],
                goal="0",
                meets_goal=cold["guessers"]["failed_after_first_200"] == 0 and "200" in cold["guessers"]["outcomes"],
                note=f"of {cold['guessers']['scrapes']} (alone: of {cold['alone']['scrapes']}); ratio column: the difference",
            ),
        ]
        notes.append(
            f"Cold start: one cost-14 check took {cold['check_seconds']:.2f} s here (in this process, not niced); "
            f"the scraper scraped every {cold['scrape_every_seconds']:.2f} s, giving each up after as long."
        )
        tables["A scraper's cold start against a cost-14 user (timeout: half a check)"] = [
            {"run": r, **cold[r]} for r in ("alone", "guessers")
        ]
    if figures:
        notes.append(
            "Issue 45's figures counting requests (failed, over 1 s, 429): the ratio column is the difference from the baseline's "
            "count; how many were sent in each window is in the tables below."
        )
    traffic_rows = [
        {
            "part": name,
            "kind": kind,
            "clients": t["clients"],
            "connects": t["connects"],
            "requests": t["requests"],
            "statuses": ", ".join(f"{k}: {v}" for k, v in sorted(t["status"].items())) or "-",
            "closed by exporter": t["closed_by_server"],
            "errors": ", ".join(f"{k}: {v}" for k, v in sorted(t["errors"].items())) or "-",
        }
        for name, part in raw.items()
        for kind, t in part.get("traffic", {}).items()
        if t["connects"] or t["requests"]
    ]
    if traffic_rows:
        tables["Issue 45's hostile traffic"] = traffic_rows
    if "flood" in raw:
        tables["Issue 45's hostile traffic"].append(
            {
                "part": "flood",
                "kind": "refused by the exporter",
                "statuses": ", ".join(f"{k}: {v:g}" for k, v in sorted(raw["flood"]["flood"]["rejected"].items())),
            }
        )
    return {"figures": figures, "tables": tables, "raw": raw}
