"""The one HTTP client of `diagnose` and `report` (Prometheus' API, an exporter's /metrics).

Bounded whatever the server does:

- a **total** deadline per request (connect, headers and body together, ``timeout``): a server
  that trickles a byte every second cannot stretch a request past it, unlike a per-read socket
  timeout, which each byte resets;
- a deadline per command (:class:`Deadline`, ``--deadline``): every request gets what is left of
  it, and none starts after it has passed;
- a cap on the answer's size (``max_bytes``): read in chunks and refused as soon as it is
  passed, so a 64 MiB exposition costs the cap, not the answer.

Every failure is an :class:`HttpFailure` whose message says what happened in words.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import ClientResponse

MiB = 1 << 20
CHUNK = 64 * 1024


class HttpFailure(Exception):
    """A request that did not give a usable answer; the message is meant for the user."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes = field(repr=False)  # asyncio.run (3.11, main thread) formats the finished task, answer and all


class Deadline:
    """The end of a command's time (monotonic); ``None`` seconds: no end beyond each request's."""

    def __init__(self, seconds: float | None, flag: str = "--deadline") -> None:
        self.seconds = seconds
        self.flag = flag
        self.end = math.inf if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def bound(self, timeout: float) -> float:
        """The time a request may take now: ``timeout``, or less when the command ends sooner."""
        left = self.remaining()
        if left <= 0:
            raise HttpFailure(f"did not finish within {self.flag} {self.seconds:g}s")
        return min(timeout, left)


def fetch(
    url: str,
    *,
    timeout: float,
    max_bytes: int,
    what: str,
    method: str = "GET",
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    deadline: Deadline | None = None,
) -> Answer:
    """One request to its end within its bounds; an HTTP error status is an Answer, not a failure."""
    bound = deadline.bound(timeout) if deadline is not None else timeout
    try:
        return asyncio.run(_fetch(url, method, data, dict(headers or {}), bound, max_bytes, what))
    except (TimeoutError, asyncio.TimeoutError):
        cut = deadline is not None and bound < timeout
        limit = f"{deadline.flag} {deadline.seconds:g}s" if cut and deadline else f"{bound:g}s (--timeout)"
        raise HttpFailure(f"{what} did not answer within {limit}") from None


async def _fetch(url: str, method: str, data: bytes | None, headers: dict[str, str], bound: float, max_bytes: int, what: str) -> Answer:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=bound)
    try:
        async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as session:
            async with session.request(method, url, data=data, headers=headers) as response:
                body = await _read(response, max_bytes if response.status < 400 else MiB, what)
                return Answer(response.status, response.reason or "", body)
    except aiohttp.ClientConnectorError as exc:
        error = exc.os_error
        reason = os.strerror(error.errno) if error is not None and error.errno else (error or exc)
        raise HttpFailure(f"cannot reach {what}: {reason}") from None
    except aiohttp.InvalidURL:
        raise HttpFailure(f"{what}: not a URL that can be fetched") from None
    except aiohttp.ClientError as exc:
        raise HttpFailure(f"cannot read {what}: {exc or type(exc).__name__}") from None


async def _read(response: ClientResponse, max_bytes: int, what: str) -> bytes:
    length = response.content_length
    if length is not None and length > max_bytes:
        raise HttpFailure(f"{what} answered {length} bytes, more than the {_size(max_bytes)} read at most")
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise HttpFailure(f"{what} answered more than the {_size(max_bytes)} read at most")
        parts.append(chunk)
    return b"".join(parts)


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"
