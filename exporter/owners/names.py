"""The names the owner source puts on ids, each cached: containers' names from their engine's
socket (Docker's and Podman's inspect request, engine.py; containerd's labels, containerd.py),
users' names from a passwd file or the system's user database.

A container's name is asked once and kept (an unanswered request is asked again a minute
later); a run asks for a few at most, at once, each bounded by `owners.timeout`, so a socket
that hangs costs one timeout per run, and its containers are shown by id. Every failure is
counted by runtime and reason.
"""

from __future__ import annotations

import asyncio
import pwd
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping

from exporter.core import clock as clocks
from exporter.core.clock import Clock
from exporter.core.health import Failure
from exporter.owners import containerd, engine
from exporter.owners.engine import NAME_FAILURES, socket_present
from exporter.owners.hostfiles import read_passwd
from exporter.owners.parse import CONTAINERD, DOCKER, PODMAN, OwnerError

Lookup = Callable[[str, str, float], Awaitable[str]]

NAME_TTL = 600.0  # a name is asked again after this (`docker rename` is rare)
RETRY_AFTER = 60.0  # an unanswered request is asked again after this
MAX_LOOKUPS = 8  # requests per run (at once)
MAX_CACHED = 4096
NAMED_RUNTIMES = (DOCKER, PODMAN, CONTAINERD)  # engines asked for their containers' names
LOOKUPS: dict[str, Lookup] = {DOCKER: engine.container_name, PODMAN: engine.container_name, CONTAINERD: containerd.container_name}
SOCKET_FAILURES = ("timeout", "unavailable")  # the socket's fault, not the container's: the source's health
PASSWD_TTL = 300.0  # a passwd file is read again after this, when a uid is not in it


class ContainerNames:
    """Containers' names by (runtime, id), asked of the engines' sockets."""

    def __init__(
        self, sockets: Mapping[str, str | None], timeout: float, lookup: Lookup | None = None, clock: Clock = clocks.monotonic
    ) -> None:
        """``lookup`` asks every engine (tests); by default each runtime's own request."""
        self.sockets = {runtime: path for runtime, path in sockets.items() if path}
        self.timeout = timeout
        self._lookups = {runtime: lookup or LOOKUPS[runtime] for runtime in NAMED_RUNTIMES}
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[str, float]] = {}  # (runtime, id) -> (name or "", asked again at)
        self.failures: Counter[tuple[str, str]] = Counter({(r, reason): 0 for r in NAMED_RUNTIMES for reason in NAME_FAILURES})

    def name(self, runtime: str, container_id: str) -> str:
        """The cached name, or "" (not asked yet, or not answered)."""
        return self._cache.get((runtime, container_id), ("", 0.0))[0]

    async def refresh(self, wanted: Iterable[tuple[str, str]]) -> list[Failure]:
        """Ask for the names of ``wanted`` (runtime, id) not cached; the sockets' failures."""
        now = self._clock()
        due = [key for key in dict.fromkeys(wanted) if key[0] in self.sockets and self._cache.get(key, ("", 0.0))[1] <= now]
        present = {runtime: socket_present(path) for runtime, path in self.sockets.items()}
        due = [key for key in due if present[key[0]]][:MAX_LOOKUPS]
        results = await asyncio.gather(*(self._ask(*key) for key in due))
        self._trim(now)
        failures: dict[str, Failure] = {}
        for (runtime, _), failure in zip(due, results):
            if failure is not None and failure.reason in SOCKET_FAILURES:
                failures.setdefault(runtime, Failure(self.sockets[runtime], failure.reason, failure.message))
        return list(failures.values())

    def subjects(self) -> list[str]:
        return [path for runtime, path in self.sockets.items() if socket_present(path)]

    async def _ask(self, runtime: str, container_id: str) -> Failure | None:
        try:
            name = await self._lookups[runtime](self.sockets[runtime], container_id, self.timeout)
        except OwnerError as exc:
            self.failures[(runtime, exc.reason)] += 1
            self._cache[(runtime, container_id)] = ("", self._clock() + RETRY_AFTER)
            return Failure(self.sockets[runtime], exc.reason, str(exc))
        self._cache[(runtime, container_id)] = (name, self._clock() + NAME_TTL)
        return None

    def _trim(self, now: float) -> None:
        if len(self._cache) > MAX_CACHED:
            self._cache = {key: value for key, value in self._cache.items() if value[1] > now}
            if len(self._cache) > MAX_CACHED:
                self._cache.clear()

    def counts(self) -> tuple[tuple[str, str, int], ...]:
        return tuple((runtime, reason, count) for (runtime, reason), count in sorted(self.failures.items()))


class UserNames:
    """Users' names by uid: from ``passwd`` (a file) or the system's user database; the number
    where neither knows the uid."""

    def __init__(self, passwd: str | None, timeout: float, clock: Clock = clocks.monotonic) -> None:
        self.passwd = passwd
        self.timeout = timeout
        self._clock = clock
        self._file: dict[int, str] = {}
        self._read_at: float | None = None
        self._cache: dict[int, tuple[str, float]] = {}  # uid -> (name or "", asked again at)

    async def names(self, uids: Iterable[int]) -> tuple[dict[int, str], list[Failure]]:
        """The name of each of ``uids`` (the number where none is known); the passwd file's failure."""
        now = self._clock()
        wanted = [uid for uid in dict.fromkeys(uids) if self._cache.get(uid, ("", 0.0))[1] <= now]
        failures: list[Failure] = []
        if wanted and self.passwd is not None:
            failures = await self._reread()
        for uid in wanted:
            name = self._file.get(uid) if self.passwd is not None else await self._system(uid)
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[uid] = (name, float("inf")) if name else ("", now + PASSWD_TTL)
        return {uid: self._cache.get(uid, ("", 0.0))[0] or str(uid) for uid in uids}, failures

    async def _reread(self) -> list[Failure]:
        assert self.passwd is not None
        if self._read_at is not None and self._clock() - self._read_at < PASSWD_TTL:
            return []
        self._read_at = self._clock()
        try:
            self._file = await asyncio.to_thread(read_passwd, self.passwd)
        except OwnerError as exc:
            return [Failure(self.passwd, exc.reason, str(exc))]
        return []

    async def _system(self, uid: int) -> str | None:
        """getpwuid(3), which may ask a directory service: bounded, the number when it does not answer."""
        try:
            entry = await asyncio.wait_for(asyncio.to_thread(pwd.getpwuid, uid), self.timeout)
        except (KeyError, asyncio.TimeoutError, TimeoutError, OSError):
            return None
        return entry.pw_name
