"""`python -m benchmarks._abuse_load CONFIG_JSON OUT_DIR`: the hostile traffic of exporter_abuse.

One asyncio event loop, in its own process (so its CPU does not delay the measuring client's
timers), against 127.0.0.1:PORT only, each kind of client from loopback addresses of its own
(127.K.x.y: the exporter's per-address bounds see many clients, as they would in a cluster):

- ingest (127.4.0.1, bearer token): fills the default caps (jobs x ranks), then POSTs batches
  round-robin to the ranks it holds, and every tenth POST a job that does not fit (429);
- auth: clients sending basic auth with a wrong password, each on its own keep-alive
  connection, from ``auth_addresses`` distinct addresses (127.1.x.y);
- idle: connections that send nothing (127.2.x.y), reconnecting when the exporter closes them;
- slow: connections that never read (SO_RCVBUF 4 KiB, 127.3.x.y): even ones pipeline
  GET /metrics with valid credentials (a stuck scraper), odd ones bursts of unauthenticated
  GET /healthz (exempt from auth); a new burst every second; reconnecting when dropped;
- overflow: idle connections beyond the connection limit (127.5.x.y), reconnecting when closed;
- stalled: POST /api/v1/steps with the bearer token announcing 1 MiB, all but one byte sent,
  then silence (127.6.x.y, ``stalled_addresses`` of them), reconnecting when answered or closed;
- churn: ``churn`` clients that each connect, stay silent 0.9 s and close, again and again
  (127.7.x.y, ``churn_addresses`` of them: hundreds of new connections a second);
- malformed: clients sending `Content-Length: abc` on new connections back to back
  (127.8.x.y), each answer counted;
- flood (issue 45): new silent connections from ``flood_source`` (the measuring clients' own
  address, 127.0.0.1) at ``flood_rate`` a second, each closed after ``flood_hold`` seconds;
- tls_hog (issue 45): ``tls_hog`` connections from ``tls_hog_source`` that each send the first
  6 bytes of a TLS ClientHello and stall, renewed every ``tls_hog_renew`` seconds;
- guess (issue 45): ``guessers`` addresses (127.9.0.x) each sending a wrong password every
  ``guess_pause`` seconds on a new connection, without waiting for the answers before the next.

Every kind is optional (a count or rate of 0, or absent: not run), ingest included.

Writes OUT_DIR/ready once every kind has started, runs until OUT_DIR/stop appears (or its
hard deadline), then writes OUT_DIR/result.json: per kind, requests, statuses, errors and
connects. Every loop ends at the deadline; every socket is closed on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._rawhttp import HOST, Connection, basic_auth, request_bytes

PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def address(block: int, index: int) -> str:
    return f"127.{block}.{index // 250}.{index % 250 + 1}"


class Stats:
    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, Any]] = {}

    def kind(self, name: str, clients: int) -> dict[str, Any]:
        self.kinds[name] = {
            "clients": clients,
            "requests": 0,
            "status": Counter(),
            "errors": Counter(),
            "connects": 0,
            "closed_by_server": 0,
        }
        return self.kinds[name]

    def json(self) -> dict[str, Any]:
        return {name: {k: dict(v) if isinstance(v, Counter) else v for k, v in kind.items()} for name, kind in self.kinds.items()}


class Load:
    def __init__(self, config: dict[str, Any], out: Path) -> None:
        self.cfg = config
        self.port = int(config["port"])
        self.out = out
        self.stats = Stats()
        self.stop = asyncio.Event()
        self.deadline = time.monotonic() + float(config["max_seconds"])

    def running(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    async def pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stop.wait(), max(0.0, min(seconds, self.deadline - time.monotonic())))

    async def send(self, conn: Connection, raw: bytes, st: dict[str, Any]) -> None:
        """One request, counted by status; a failed one by error, then a short pause."""
        try:
            status, _, _, _ = await conn.request(raw)
            st["requests"] += 1
            st["status"][str(status)] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            st["errors"][type(exc).__name__] += 1
            await self.pause(0.1)

    async def watch_stop(self) -> None:
        while self.running():
            if (self.out / "stop").exists():
                self.stop.set()
            await self.pause(0.1)
        self.stop.set()

    # --- ingest at the caps ---------------------------------------------------------------------
    async def ingest(self) -> None:
        cfg = self.cfg
        st = self.stats.kind("ingest", 1)
        conn = Connection(self.port, address(4, 0), timeout=10)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {cfg['ingest_token']}"}
        held = [(f"abuse-{j}", r) for j in range(int(cfg["ingest_jobs"])) for r in range(int(cfg["ingest_ranks"]))]
        phases = {"h2d": 0.002, "compute": 0.03, "communication": 0.01, "data": 0.003}

        def batch(job: str, rank: int, steps: int) -> bytes:
            end = time.time()
            body = {
                "job_name": job,
                "rank": rank,
                "world_size": max(16, rank + 1),
                "device": str(rank % 16),
                "pid": 4000 + rank,
                "steps": [{"end": end, "duration": 0.05, "samples": 32, "phases": phases}] * steps,
            }
            return request_bytes("POST", "/api/v1/steps", headers, json.dumps(body, separators=(",", ":")).encode())

        index = 0
        try:
            while self.running():
                if index < len(held):
                    job, rank = held[index]  # fill the caps first
                    raw = batch(job, rank, 1)
                elif index % 10 == 0:
                    raw = batch(f"over-{index}", 0, 1)  # does not fit: 429
                else:
                    job, rank = held[index % len(held)]
                    raw = batch(job, rank, int(cfg["ingest_batch"]))
                index += 1
                await self.send(conn, raw, st)
                if index >= len(held):
                    await self.pause(float(cfg["ingest_pause"]))
        finally:
            st["connects"] = conn.connects
            conn.close()

    # --- wrong passwords ------------------------------------------------------------------------
    async def wrong_password(self, index: int, st: dict[str, Any]) -> None:
        cfg = self.cfg
        conn = Connection(self.port, address(1, index % int(cfg["auth_addresses"])), timeout=10)
        attempt = 0
        try:
            while self.running():
                attempt += 1
                raw = request_bytes(
                    "GET",
                    "/metrics",
                    {
                        "Accept": PROMETHEUS_ACCEPT,
                        "Accept-Encoding": "gzip",
                        "Authorization": basic_auth(cfg["user"], f"wrong-{index}-{attempt}"),
                    },
                )
                await self.send(conn, raw, st)
                await self.pause(float(cfg["auth_pause"]))
        finally:
            st["connects"] += conn.connects
            conn.close()

    # --- idle connections (also the overflow beyond the limit) -----------------------------------
    async def idle(self, block: int, index: int, st: dict[str, Any], reconnect_pause: float) -> None:
        while self.running():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=(address(block, index), 0)), 5)
                st["connects"] += 1
                stopped = asyncio.ensure_future(self.stop.wait())
                read = asyncio.ensure_future(reader.read(1))
                await asyncio.wait({stopped, read}, timeout=max(0.0, self.deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if read.done() and not read.cancelled() and read.exception() is None:
                    st["closed_by_server"] += 1  # the exporter closed it (b"") or answered (it never does)
                else:
                    read.cancel()
                    with contextlib.suppress(BaseException):
                        await read
                    if read.done() and not read.cancelled() and read.exception() is not None:
                        st["errors"][type(read.exception()).__name__] += 1
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
            finally:
                if writer is not None:
                    writer.transport.abort()
            await self.pause(reconnect_pause)

    # --- connections that never read --------------------------------------------------------------
    async def slow(self, index: int, st: dict[str, Any]) -> None:
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        if index % 2 == 0:
            burst = (
                request_bytes("GET", "/metrics", {"Accept-Encoding": "identity", "Authorization": basic_auth(cfg["user"], cfg["password"])})
                * 4
            )
        else:
            burst = request_bytes("GET", "/healthz") * 200
        while self.running():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.bind((address(3, index), 0))
                sock.setblocking(False)
                await asyncio.wait_for(loop.sock_connect(sock, (HOST, self.port)), 5)
                st["connects"] += 1
                while self.running():
                    try:
                        await asyncio.wait_for(loop.sock_sendall(sock, burst), 1.0)
                        st["requests"] += burst.count(b"GET ")
                    except asyncio.TimeoutError:
                        st["errors"]["send_blocked"] += 1  # the exporter stopped reading us: fine
                    await self.pause(1.0)
            except (ConnectionResetError, BrokenPipeError):
                st["closed_by_server"] += 1  # the exporter dropped a client that does not read
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
            finally:
                sock.close()
            await self.pause(0.5)

    # --- stalled bodies, churn, malformed requests -------------------------------------------------
    async def stalled(self, index: int, st: dict[str, Any]) -> None:
        cfg = self.cfg
        head = (
            f"POST /api/v1/steps HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {cfg['ingest_token']}\r\nContent-Length: {1 << 20}\r\n\r\n"
        ).encode()
        body = b"[" + b" " * ((1 << 20) - 2)
        while self.running():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(HOST, self.port, local_addr=(address(6, index % int(cfg["stalled_addresses"])), 0)), 5
                )
                st["connects"] += 1
                writer.write(head + body)
                answer = asyncio.ensure_future(reader.read(64))
                stopped = asyncio.ensure_future(self.stop.wait())
                await asyncio.wait(
                    {answer, stopped}, timeout=max(0.0, self.deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
                )
                stopped.cancel()
                if answer.done() and answer.exception() is None:
                    got = answer.result()
                    st["requests"] += 1
                    st["status"][got[9:12].decode(errors="replace") if got else "closed"] += 1
                else:
                    answer.cancel()
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
            finally:
                if writer is not None:
                    writer.transport.abort()
            await self.pause(0.5)

    async def churn(self, index: int, st: dict[str, Any]) -> None:
        source = address(7, index % int(self.cfg["churn_addresses"]))
        while self.running():
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=(source, 0)), 5)
                st["connects"] += 1
                await self.pause(0.9)
                writer.transport.abort()
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
                await self.pause(0.1)

    async def malformed(self, index: int, st: dict[str, Any]) -> None:
        raw = b"POST /api/v1/steps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n"
        while self.running():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=(address(8, index), 0)), 5)
                st["connects"] += 1
                writer.write(raw)
                got = await asyncio.wait_for(reader.read(64), 5)
                st["requests"] += 1
                st["status"][got[9:12].decode(errors="replace") if got else "closed"] += 1
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
                await self.pause(0.1)
            finally:
                if writer is not None:
                    writer.transport.abort()
            await asyncio.sleep(0)

    # --- issue 45: one address against every budget ----------------------------------------------
    async def flood(self, st: dict[str, Any]) -> None:
        cfg = self.cfg
        rate, hold, source = float(cfg["flood_rate"]), float(cfg.get("flood_hold", 1.0)), str(cfg.get("flood_source", HOST))
        pending: set[asyncio.Future[None]] = set()

        async def one() -> None:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=(source, 0)), 5)
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
                return
            st["connects"] += 1
            await self.pause(hold)
            writer.transport.abort()  # a reset: no TIME_WAIT left behind by thousands of them

        start, sent = time.monotonic(), 0
        try:
            while self.running():
                due = int((time.monotonic() - start) * rate) - sent
                for _ in range(max(0, min(due, int(rate)))):  # a stalled loop does not burst past a second's worth
                    task = asyncio.ensure_future(one())
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                sent += max(0, due)
                await asyncio.sleep(0.005)
        finally:
            for task in list(pending):
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def tls_hog(self, index: int, st: dict[str, Any]) -> None:
        cfg = self.cfg
        source, renew = str(cfg.get("tls_hog_source", HOST)), float(cfg.get("tls_hog_renew", 8.0))
        while self.running():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.port, local_addr=(source, 0)), 5)
                st["connects"] += 1
                writer.write(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's first 6 bytes, then nothing
                read = asyncio.ensure_future(reader.read(1))
                await asyncio.wait({read}, timeout=max(0.0, min(renew, self.deadline - time.monotonic())))
                if read.done():
                    st["closed_by_server"] += 1
                else:
                    read.cancel()
                    await asyncio.gather(read, return_exceptions=True)
            except (OSError, asyncio.TimeoutError) as exc:
                st["errors"][type(exc).__name__] += 1
                await self.pause(0.1)
            finally:
                if writer is not None:
                    writer.transport.abort()

    async def guess(self, index: int, st: dict[str, Any]) -> None:
        cfg = self.cfg
        pending: set[asyncio.Future[None]] = set()

        async def one(attempt: int) -> None:
            conn = Connection(self.port, address(9, index), timeout=10)
            raw = request_bytes("GET", "/metrics", {"Authorization": basic_auth(cfg["user"], f"guess-{index}-{attempt}")})
            try:
                await self.send(conn, raw, st)
            finally:
                st["connects"] += conn.connects
                conn.close()

        attempt = 0
        try:
            while self.running():
                attempt += 1
                task = asyncio.ensure_future(one(attempt))
                pending.add(task)
                task.add_done_callback(pending.discard)
                await self.pause(float(cfg["guess_pause"]))
        finally:
            for task in list(pending):
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def main(self) -> None:
        cfg = self.cfg
        tasks = [asyncio.ensure_future(self.watch_stop())]
        if int(cfg.get("ingest_jobs", 0)):
            tasks.append(asyncio.ensure_future(self.ingest()))
        auth = self.stats.kind("wrong_password", int(cfg.get("auth_clients", 0)))
        tasks += [asyncio.ensure_future(self.wrong_password(i, auth)) for i in range(int(cfg.get("auth_clients", 0)))]
        idle = self.stats.kind("idle", int(cfg.get("idle", 0)))
        tasks += [asyncio.ensure_future(self.idle(2, i, idle, 0.5)) for i in range(int(cfg.get("idle", 0)))]
        slow = self.stats.kind("slow_reader", int(cfg.get("slow", 0)))
        tasks += [asyncio.ensure_future(self.slow(i, slow)) for i in range(int(cfg.get("slow", 0)))]
        overflow = self.stats.kind("overflow", int(cfg.get("overflow", 0)))
        tasks += [asyncio.ensure_future(self.idle(5, i, overflow, 0.25)) for i in range(int(cfg.get("overflow", 0)))]
        for kind, work in (("stalled", self.stalled), ("churn", self.churn), ("malformed", self.malformed)):
            st = self.stats.kind(kind, int(cfg.get(kind, 0)))
            tasks += [asyncio.ensure_future(work(i, st)) for i in range(int(cfg.get(kind, 0)))]
        for kind, work in (("tls_hog", self.tls_hog), ("guessers", self.guess)):  # issue 45's, reported only when run
            if int(cfg.get(kind, 0)):
                st = self.stats.kind(kind, int(cfg[kind]))
                tasks += [asyncio.ensure_future(work(i, st)) for i in range(int(cfg[kind]))]
        if float(cfg.get("flood_rate", 0)):
            tasks.append(asyncio.ensure_future(self.flood(self.stats.kind("flood", 1))))
        await asyncio.sleep(0.5)
        (self.out / "ready").write_text("ready\n")
        await asyncio.wait(tasks, timeout=max(1.0, self.deadline - time.monotonic() + 5))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m benchmarks._abuse_load CONFIG_JSON OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    load = Load(json.loads(Path(argv[0]).read_text(encoding="utf-8")), out)
    try:
        asyncio.run(load.main())
    finally:
        (out / "result.json").write_text(json.dumps(load.stats.json()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
