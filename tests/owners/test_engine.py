"""Container names from a Docker Engine API stand-in on a unix socket (aiohttp): the name, a
404, a body that is not JSON, a request that is never answered, a socket that never accepts,
and no socket at all; through the name cache, each failure counted and bounded."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from exporter.owners.engine import container_name, name_from_inspect, socket_present
from exporter.owners.names import MAX_LOOKUPS, ContainerNames
from exporter.owners.parse import OwnerError
from tests.support.owners import EngineStandIn, silent_socket

TRAINER, GONE, STUCK, BROKEN = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)


def test_the_name_of_an_inspect_answer() -> None:
    assert name_from_inspect(b'{"Id": "x", "Name": "/llama-train"}') == "llama-train"
    for body in (b"", b"[]", b'{"Name": "/"}', b'{"Name": 7}', b"\xff\xfe"):
        with pytest.raises(OwnerError) as raised:
            name_from_inspect(body)
        assert raised.value.reason == "garbled"


def test_names_not_found_garbage_and_a_hang(sock_dir: Path) -> None:
    path = sock_dir / "docker.sock"

    async def run() -> tuple[str, list[str], float]:
        async with EngineStandIn(path, {TRAINER: "llama-train"}, hang=(STUCK,), garbage=(BROKEN,)) as engine:
            name = await container_name(str(path), TRAINER, 2.0)
            reasons = []
            for container in (GONE, BROKEN):
                with pytest.raises(OwnerError) as raised:
                    await container_name(str(path), container, 2.0)
                reasons.append(raised.value.reason)
            began = time.monotonic()
            with pytest.raises(OwnerError) as raised:
                await container_name(str(path), STUCK, 0.3)
            reasons.append(raised.value.reason)
            assert engine.asked == [TRAINER, GONE, BROKEN, STUCK]
            return name, reasons, time.monotonic() - began

    name, reasons, waited = asyncio.run(run())
    assert name == "llama-train" and reasons == ["not_found", "garbled", "timeout"]
    assert waited < 2.0  # bounded by the timeout, not the stand-in


def test_a_socket_that_never_accepts_and_no_socket(sock_dir: Path) -> None:
    silent = silent_socket(sock_dir / "silent.sock")
    try:
        began = time.monotonic()
        with pytest.raises(OwnerError) as raised:
            asyncio.run(container_name(str(sock_dir / "silent.sock"), TRAINER, 0.3))
        assert raised.value.reason == "timeout" and time.monotonic() - began < 2.0
    finally:
        silent.close()
    assert not socket_present(str(sock_dir / "absent.sock")) and not socket_present(str(sock_dir))
    with pytest.raises(OwnerError) as raised:
        asyncio.run(container_name(str(sock_dir / "absent.sock"), TRAINER, 0.3))
    assert raised.value.reason == "unavailable"


def test_the_cache_asks_once_retries_later_and_counts(sock_dir: Path) -> None:
    path = sock_dir / "docker.sock"
    now = [1000.0]
    names = ContainerNames({"docker": str(path), "podman": None}, 0.3, clock=lambda: now[0])

    async def run() -> tuple[list[str], list[str]]:
        async with EngineStandIn(path, {TRAINER: "llama-train"}, hang=(STUCK,)) as engine:
            failures = await names.refresh([("docker", TRAINER), ("docker", STUCK), ("docker", GONE), ("podman", TRAINER)])
            await names.refresh([("docker", TRAINER), ("docker", STUCK), ("docker", GONE)])  # all cached
            first = list(engine.asked)
            now[0] += 61  # the unanswered are asked again; the name is kept
            await names.refresh([("docker", TRAINER), ("docker", STUCK)])
            assert [f.reason for f in failures] == ["timeout"]  # the socket's fault, once per socket
            return first, engine.asked[len(first) :]

    first, again = asyncio.run(run())
    assert sorted(first) == sorted([TRAINER, STUCK, GONE]) and again == [STUCK]
    assert names.name("docker", TRAINER) == "llama-train" and names.name("docker", STUCK) == ""
    counts = {(runtime, reason): count for runtime, reason, count in names.counts()}
    assert counts[("docker", "timeout")] == 2 and counts[("docker", "not_found")] == 1
    assert counts[("podman", "timeout")] == 0  # no podman socket: never asked, every reason shown


def test_a_run_asks_a_few_at_once_and_an_absent_socket_never(sock_dir: Path) -> None:
    path = sock_dir / "docker.sock"
    many = [("docker", f"{n:064x}") for n in range(3 * MAX_LOOKUPS)]
    names = ContainerNames({"docker": str(path)}, 1.0)

    async def run() -> int:
        assert await names.refresh(many) == []  # no socket yet: nothing asked, nothing failing
        async with EngineStandIn(path, {}) as engine:
            await names.refresh(many)
            return len(engine.asked)

    assert asyncio.run(run()) == MAX_LOOKUPS
    assert sum(count for _, _, count in names.counts()) == MAX_LOOKUPS  # each a 404
