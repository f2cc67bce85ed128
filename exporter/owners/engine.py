"""A container's name from its engine: the Docker Engine API (`GET /containers/<id>/json`) on a
unix socket, which Docker serves and Podman serves in Docker's form on its own socket
(`podman system service`). One call per container the cache does not know, bounded by a
timeout; a socket that is not there is not asked (ids only).

:func:`container_name` makes the call and returns the name or raises OwnerError with a
reason (one of NAME_FAILURES); :func:`name_from_inspect` is pure.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat

import aiohttp

from exporter.owners.parse import OwnerError

MAX_ANSWER = 1 << 20  # an inspect answer is a few KiB (more with a large environment)
# Why a name could not be had (label `reason` of cann_exporter_owner_name_lookup_failures_total).
NAME_FAILURES = ("timeout", "unavailable", "not_found", "refused", "garbled")


def socket_present(path: str) -> bool:
    """A unix socket is at ``path`` (nothing to ask where it is not)."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def socket_problem(path: str) -> str | None:
    """Why the socket at ``path`` cannot be asked (`not there`, `no permission`, `refused`), or
    None when a connection is accepted (check-config; the connection is closed at once)."""
    if not socket_present(path):
        return "not there"
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(0.5)
    try:
        client.connect(path)
    except PermissionError:
        return "no permission"
    except OSError:
        return "refused"
    finally:
        client.close()
    return None


def name_from_inspect(body: bytes) -> str:
    """The container's name from an inspect answer (`"Name": "/trainer"`), without Docker's `/`."""
    try:
        found = json.loads(body)
    except ValueError as exc:
        raise OwnerError("garbled", f"inspect answer is not JSON: {exc}") from None
    name = found.get("Name") if isinstance(found, dict) else None
    if not isinstance(name, str) or not name.strip("/"):
        raise OwnerError("garbled", "inspect answer has no Name")
    return name.lstrip("/")


async def container_name(socket: str, container_id: str, timeout: float) -> str:
    """The name of container ``container_id`` from the engine on ``socket``; OwnerError otherwise."""
    try:
        return await asyncio.wait_for(_ask(socket, container_id, timeout), timeout + 0.5)
    except (asyncio.TimeoutError, TimeoutError):
        raise OwnerError("timeout", f"{socket}: no answer within {timeout:g}s") from None
    except aiohttp.ClientResponseError as exc:
        raise OwnerError("garbled", f"{socket}: {exc.message}") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise OwnerError("unavailable", f"{socket}: {exc}") from None


async def _ask(socket: str, container_id: str, timeout: float) -> str:
    connector = aiohttp.UnixConnector(path=socket)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=client_timeout) as session:
        async with session.get(f"http://localhost/containers/{container_id}/json") as answer:
            if answer.status == 404:
                raise OwnerError("not_found", f"{socket}: no container {container_id}")
            if answer.status != 200:
                raise OwnerError("refused", f"{socket}: inspect answered {answer.status}")
            body = await answer.content.read(MAX_ANSWER + 1)
    if len(body) > MAX_ANSWER:
        raise OwnerError("garbled", f"{socket}: inspect answer over {MAX_ANSWER} bytes")
    return name_from_inspect(body)
