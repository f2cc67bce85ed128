"""The web config in force: loaded with the files it names, re-read when they change (keeping
the last good state when they are broken), and the credentials check the middleware asks."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt

from exporter.core.clock import Clock, monotonic, wall
from exporter.web.auth import (
    AUTH_CACHE_SECONDS,
    AUTH_CACHE_SIZE,
    SuccessCache,
    checkpw,
    parse_basic,
)
from exporter.web.collector import WebStatus
from exporter.web.config import WebConfig, WebConfigError, parse_web_config
from exporter.web.tls import ReloadableSSLContext, build_ssl_context

log = logging.getLogger("exporter.web")

RELOAD_POLL_SECONDS = 1.0

Signature = tuple[tuple[str, int, int, int], ...]


def _signature(paths: Iterator[Path] | tuple[Path, ...]) -> Signature:
    """What identifies the files' content cheaply: a rewrite or a symlink swap changes it."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((str(path), -1, -1, -1))
    return tuple(out)


@dataclass(frozen=True)
class WebState:
    config: WebConfig
    ssl_context: ssl.SSLContext | None
    dummy_hash: bytes | None          # checked for unknown users, so they cost what a real user costs
    signature: Signature


def _dummy_hash(users: Mapping[str, bytes]) -> bytes | None:
    if not users:
        return None
    cost = max(int(h.split(b"$")[2]) for h in users.values())
    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(cost))


def load_web_config(path: Path | str) -> WebState:
    """Read and check the file and what it names; WebConfigError listing every problem."""
    path = Path(path)
    before = _signature((path,))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError([f"{path}: cannot read: {exc}"]) from None
    config = parse_web_config(text, path.parent, str(path))
    files = config.tls.files if config.tls else ()
    signature = before + _signature(files)  # taken before reading: a change meanwhile reloads again
    ctx = build_ssl_context(config.tls) if config.tls else None
    return WebState(config, ctx, _dummy_hash(config.users), signature)



class WebSecurity:
    """The web config in force: reloads it on change, authenticates requests, counts outcomes."""

    def __init__(
        self,
        path: Path | str,
        state: WebState,
        *,
        exempt_paths: frozenset[str] = frozenset(),
        poll_interval: float = RELOAD_POLL_SECONDS,
        cache_seconds: float = AUTH_CACHE_SECONDS,
        wall_clock: Clock = wall,
        clock: Clock = monotonic,
    ) -> None:
        self.path = Path(path)
        self.state = state
        self.exempt_paths = exempt_paths
        self.poll_interval = poll_interval
        self.wall_clock = wall_clock
        self.ssl_context = ReloadableSSLContext.wrapping(state.ssl_context) if state.ssl_context else None
        self._cache = SuccessCache(cache_seconds, AUTH_CACHE_SIZE, clock)
        self._bcrypt = asyncio.Lock()     # one bcrypt at a time: CPU-bound, as exporter-toolkit does
        self._failed_signature: Signature | None = None
        self.last_reload_success = True
        self.last_reload_success_time = wall_clock()
        self.reloads: dict[str, int] = {"success": 0, "failure": 0}
        self.auth_failures: dict[str, int] = {}
        self._log_state()

    @classmethod
    def from_file(cls, path: Path | str, **kwargs: Any) -> WebSecurity:
        return cls(path, load_web_config(path), **kwargs)

    def _log_state(self) -> None:
        config = self.state.config
        log.info("web config loaded", extra={
            "file": str(self.path), "tls": config.tls is not None, "users": len(config.users),
            "client_auth": config.tls.client_auth_type if config.tls else "", "headers": ",".join(config.headers),
        })
        if config.ignored:
            log.warning("web config: accepted for compatibility but not applied", extra={"keys": ",".join(config.ignored)})

    # --- reload ---

    def reload_if_changed(self) -> bool | None:
        """Re-read when a file changed: True reloaded, False kept the last good state, None unchanged.
        Blocking (file reads, bcrypt): run it in a thread."""
        paths = [self.path, *(self.state.config.tls.files if self.state.config.tls else ())]
        current = _signature(tuple(paths))
        if current == self.state.signature or current == self._failed_signature:
            return None
        try:
            new = load_web_config(self.path)
            if (new.ssl_context is None) != (self.ssl_context is None):
                raise WebConfigError([f"{self.path}: switching TLS on or off needs a restart"])
        except WebConfigError as exc:
            # Log before counting: the counter is what watchers (and tests) take as "done".
            log.error("web config reload failed; keeping the last good one", extra={"file": str(self.path), "error": "; ".join(exc.problems)})
            self._failed_signature = current
            self.last_reload_success = False
            self.reloads["failure"] += 1
            return False
        self._apply(new)
        return True

    def _apply(self, new: WebState) -> None:
        self.state = new
        if self.ssl_context is not None and new.ssl_context is not None:
            self.ssl_context.current = new.ssl_context
        self._cache.clear()
        self._failed_signature = None
        self.last_reload_success = True
        self.last_reload_success_time = self.wall_clock()
        self._log_state()
        self.reloads["success"] += 1

    async def watch(self) -> None:
        """Poll the files' stat (cheap) and reload on change, for the app's lifetime."""
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await asyncio.to_thread(self.reload_if_changed)
            except Exception:  # never let a reload bug stop the watcher
                log.exception("web config reload crashed")

    # --- authentication ---

    async def authenticate(self, header: str | None) -> str | None:
        """The user name when the basic credentials are right, else None.

        Unknown users are checked against a dummy hash of the same cost, on the same path as
        a wrong password: neither the answer nor its timing tells whether the user exists."""
        creds = parse_basic(header)
        if creds is None:
            return None
        state = self.state
        user, password = creds
        try:
            name: str | None = user.decode("utf-8")
        except UnicodeDecodeError:
            name = None
        stored = state.config.users.get(name) if name is not None else None
        hashed = stored if stored is not None else state.dummy_hash
        if hashed is None:
            return None
        key = self._cache.key(user, hashed, password)
        if stored is not None and self._cache.hit(key):
            return name
        async with self._bcrypt:
            ok = await asyncio.to_thread(checkpw, password, hashed)
        if not (ok and stored is not None):
            return None
        self._cache.add(key)
        return name

    def count_failure(self, reason: str) -> None:
        self.auth_failures[reason] = self.auth_failures.get(reason, 0) + 1

    # --- the status part ---

    def part(self) -> WebStatus:
        """The reload and auth outcomes so far, for the web collector."""
        return WebStatus(
            self.last_reload_success, self.last_reload_success_time,
            tuple(sorted(self.reloads.items())), tuple(sorted(self.auth_failures.items())),
        )
