"""For the owner source: procfs trees (`<root>/<pid>/cgroup` holding a real /proc/PID/cgroup of
tests/fixtures/cgroup-procs, each with its .src; `<root>/<pid>/stat` a live process's stat) and
container engines on unix sockets: Docker's inspect request, containerd's Containers/Get."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from aiohttp import web

from exporter.owners.containerd import messages
from tests.support.paths import FIXTURES

CGROUP_FIXTURES = FIXTURES / "cgroup-procs"
# The pids of info__910B3__25.5.1__1's process table, chip 0 of NPU 0 to 7.
PIDS_910B3 = (3233241, 3233701, 3234962, 3235553, 3232170, 3231929, 2895155, 1886762)


def cgroup_text(name: str) -> str:
    path = CGROUP_FIXTURES / name
    assert (CGROUP_FIXTURES / f"{name}.src").exists(), f"{name} has no provenance"
    return path.read_text()


def real_stat(pid: int | None = None) -> str:
    """The kernel's /proc/PID/stat of a live process (this one by default)."""
    return Path(f"/proc/{pid or os.getpid()}/stat").read_text()


def procfs_tree(root: Path, cgroups: Mapping[int, str], *, stat_of: int | None = None, live: bool = False) -> Path:
    """A procfs root where each pid's cgroup is the named fixture and its stat a live process's
    (``live``: the pid's own stat and status, the pids being processes the test started)."""
    for pid, name in cgroups.items():
        directory = root / str(pid)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cgroup").write_text(cgroup_text(name))
        (directory / "stat").write_text(real_stat(pid if live else stat_of))
        if live:
            (directory / "status").write_text(Path(f"/proc/{pid}/status").read_text())
    return root


class EngineStandIn:
    """A Docker Engine API stand-in on a unix socket (aiohttp), for `async with`: GET
    /containers/<id>/json answers `{"Name": "/<name>"}` for the ids of ``names``, 404 for
    others; ids in ``hang`` are never answered (until the stand-in closes), ids in ``garbage``
    get a body that is not JSON. Every id asked is in ``asked``."""

    def __init__(self, path: Path, names: Mapping[str, str], *, hang: tuple[str, ...] = (), garbage: tuple[str, ...] = ()) -> None:
        self.path, self.names, self.hang, self.garbage = path, dict(names), hang, garbage
        self.asked: list[str] = []
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def _inspect(self, request: web.Request) -> web.Response:
        container = request.match_info["id"]
        self.asked.append(container)
        if container in self.hang:
            await self._release.wait()
        if container in self.garbage:
            return web.Response(body=b"\x00not json{", content_type="application/json")
        if container not in self.names:
            return web.json_response({"message": f"No such container: {container}"}, status=404)
        return web.json_response({"Id": container, "Name": "/" + self.names[container], "State": {"Running": True}})

    async def __aenter__(self) -> EngineStandIn:
        app = web.Application()
        app.router.add_get("/containers/{id}/json", self._inspect)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.path)).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        assert self._runner is not None
        await self._runner.cleanup()


def silent_socket(path: Path) -> socket.socket:
    """A unix socket that is listened on and never accepted: a connect succeeds, nothing answers."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    return server


@contextlib.contextmanager
def engine_thread(path: Path, names: Mapping[str, str]) -> Iterator[EngineStandIn]:
    """An EngineStandIn served by a loop of its own thread, for code that runs its own loop (`once`)."""
    loop = asyncio.new_event_loop()
    engine = EngineStandIn(path, names)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(engine.__aenter__())
        started.set()
        loop.run_forever()
        loop.run_until_complete(engine.__aexit__())
        loop.close()

    thread = threading.Thread(target=serve, name="engine-stand-in", daemon=True)
    thread.start()
    assert started.wait(10), "the engine stand-in did not start"
    try:
        yield engine
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


class FakeContainerd:
    """containerd's Containers/Get on a unix socket: ``containers`` maps a namespace to the
    labels of each container id; an id in no namespace is NOT_FOUND. ``delay`` holds each answer
    (released at stop). Every (namespace, id) asked is in ``asked``."""

    def __init__(self, socket_path: Path, containers: Mapping[str, Mapping[str, Mapping[str, str]]], delay: float = 0.0) -> None:
        self.socket, self.containers, self.delay = socket_path, containers, delay
        self.asked: list[tuple[str, str]] = []
        self._release = threading.Event()
        self._server: grpc.Server | None = None
        self._request, self._response = messages()

    def _get(self, raw: bytes, context: grpc.ServicerContext) -> bytes:
        request = self._request.FromString(raw)
        namespace = dict(context.invocation_metadata()).get("containerd-namespace", "")
        self.asked.append((namespace, request.id))
        if self.delay:
            self._release.wait(self.delay)
        labels = self.containers.get(namespace, {}).get(request.id)
        if labels is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"container {request.id!r} in namespace {namespace!r}: not found")
        answer = self._response()
        answer.container.id = request.id
        answer.container.labels.update(labels or {})
        return bytes(answer.SerializeToString())

    def __enter__(self) -> FakeContainerd:
        server = grpc.server(ThreadPoolExecutor(max_workers=4))
        handler = grpc.method_handlers_generic_handler(
            "containerd.services.containers.v1.Containers", {"Get": grpc.unary_unary_rpc_method_handler(self._get)}
        )
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
