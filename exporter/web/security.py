"""The web config in force: loaded with the files it names, re-read when they change (keeping
the last good state when they are broken), and the credentials check the middleware asks."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core.clock import Clock, monotonic, wall
from exporter.core.errors import ReasonError
from exporter.core.inputfile import read_text_input
from exporter.core.yamlfile import MAX_FILE_BYTES
from exporter.web.auth import (
    AUTH_CACHE_SECONDS,
    AUTH_CACHE_SIZE,
    OVERLOADED_RETRY_SECONDS,
    AddressThrottle,
    Dummies,
    SuccessCache,
    checkpw,
    client_address,
    parse_basic,
)
from exporter.web.bcrypt_pool import BcryptPool
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
    dummies: Dummies | None  # checked for unknown users, so they cost what a real user costs
    signature: Signature


@dataclass(frozen=True)
class _Check:
    """A credential check in the pool: whose budget it holds and what it checks against."""

    address: str
    user: bytes
    name: str | None
    stored: bytes | None  # the user's hash at submission (None: unknown user, checked against a dummy)
    budgeted: bool  # it holds a token of the failed-login budget


@dataclass(frozen=True)
class Verdict:
    """What the credentials check says: the user admitted, or why not (a reason label of
    cann_exporter_web_auth_failures_total) and, when worth retrying, after how many seconds."""

    user: str | None = None
    reason: str | None = None
    retry_after: int | None = None


def load_web_config(path: Path | str) -> WebState:
    """Read and check the file and what it names; WebConfigError listing every problem."""
    path = Path(path)
    before = _signature((path,))
    try:
        text = read_text_input(path, MAX_FILE_BYTES)
    except ReasonError as exc:
        raise WebConfigError([f"web.config_file: {exc.message}"]) from None
    config = parse_web_config(text, path.parent, str(path))
    files = config.tls.files if config.tls else ()
    signature = before + _signature(files)  # taken before reading: a change meanwhile reloads again
    try:
        ctx = build_ssl_context(config.tls) if config.tls else None
    except (OSError, ValueError, TypeError, OverflowError) as exc:  # whatever the ssl module raises on odd files
        raise WebConfigError([f"{path}: tls_server_config: {exc}"]) from None
    return WebState(config, ctx, Dummies.for_users(config.users), signature)


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
        pool: BcryptPool | None = None,
        throttle: AddressThrottle | None = None,
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
        self._pool = pool if pool is not None else BcryptPool()
        self._throttle = throttle if throttle is not None else AddressThrottle(clock=clock)
        self._checking: dict[bytes, asyncio.Future[str | None]] = {}  # cache key -> outcome of its check running (None: admitted)
        self._reloading = threading.Lock()
        self._failed_signature: Signature | None = None
        self._failed_error: str | None = None  # the error last logged; logged again only when it changes
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
        log.info(
            "web config loaded",
            extra={
                "file": str(self.path),
                "tls": config.tls is not None,
                "users": len(config.users),
                "client_auth": config.tls.client_auth_type if config.tls else "",
                "headers": ",".join(config.headers),
            },
        )
        for warning in config.warnings:
            log.warning("web config: worth changing", extra={"file": str(self.path), "warning": warning})
        if config.ignored:
            log.warning("web config: accepted for compatibility but not applied", extra={"keys": ",".join(config.ignored)})

    # --- reload ---

    def reload_if_changed(self, force: bool = False) -> bool | None:
        """Re-read when a file changed (``force``: in any case, as SIGHUP asks): True reloaded,
        False kept the last good state, None unchanged. Blocking (file reads): run it in a thread."""
        with self._reloading:  # the poll and a SIGHUP may ask at once, from two threads
            return self._reload(force)

    def _reload(self, force: bool) -> bool | None:
        paths = [self.path, *(self.state.config.tls.files if self.state.config.tls else ())]
        current = _signature(tuple(paths))
        if not force and (current == self.state.signature or current == self._failed_signature):
            return None
        try:
            new = load_web_config(self.path)
            if (new.ssl_context is None) != (self.ssl_context is None):
                raise WebConfigError([f"{self.path}: switching TLS on or off needs a restart"])
        except WebConfigError as exc:
            self._failed(current, "; ".join(exc.problems))
            return False
        except Exception as exc:  # a bug must count as a failed reload too, not crash every poll
            self._failed(current, f"{self.path}: {type(exc).__name__}: {exc}")
            return False
        self._apply(new)
        return True

    def _failed(self, signature: Signature, error: str) -> None:
        """Keep the last good state; log once per distinct error, count every failed version."""
        # Log before counting: the counter is what watchers (and tests) take as "done".
        if error != self._failed_error:
            log.error("web config reload failed; keeping the last good one", extra={"file": str(self.path), "error": error})
        self._failed_signature, self._failed_error = signature, error
        self.last_reload_success = False
        self.reloads["failure"] += 1

    def _apply(self, new: WebState) -> None:
        self.state = new
        if self.ssl_context is not None and new.ssl_context is not None:
            self.ssl_context.current = new.ssl_context
        # Same users, same hashes: every client stays verified (a certificate rotation must not
        # send every scraper back to bcrypt, behind whatever guesses are queued). A changed
        # hash could not hit anyway (it is part of the key); its entries go now.
        self._cache.retain(new.config.users)
        self._failed_signature = self._failed_error = None
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

    async def authenticate(self, header: str | None, remote: str | None = None) -> Verdict:
        """Check basic credentials from the client at ``remote`` (the connection's peer).

        In this order: a credential this address verified within the cache window is admitted
        at once (a verified scraper never waits, nor is it refused because another client at
        its address failed); the same credential from the same address while its check runs
        waits for that check (no second check, nothing more spent); one this address verified
        within the remember window is checked again in its turn in the pool, outside the
        failed-login budget; anything else is refused with 429 while the address and user, or
        the address, is out of budget (no bcrypt), else takes a token of both and is checked in
        the pool, or refused at once (503, the token given back) when the address has its share
        of the pool or the pool is full.

        A check, once queued, runs to its end whether or not its client still waits, and its
        outcome is settled then: a wrong password (or an unknown user) keeps the token, a right
        one gives it back and is cached, a check dropped for a fairer one gives it back. So the
        budget counts wrong passwords, never checks a client gave up on: a scraper whose first
        check outlasts its scrape timeout (a cold start behind guessers) finds that check's
        success cached at its next scrape instead of a spent budget.

        The cache comes first on purpose: a guesser at the very address of a verified client,
        with its user name, can try guesses against the cache at request speed once out of
        budget (429 wrong, 200 right). Refusing the verified client instead is what the cache
        is there to prevent; long random passwords make that trade safe. Unknown users take
        the path of a wrong password, against a dummy of a cost a known user has (see
        Dummies): neither answer nor time tells them apart."""
        creds = parse_basic(header)
        if creds is None:
            return self._refuse("no_credentials")
        state = self.state
        if state.dummies is None:
            return self._refuse("unknown_user")
        user, password = creds
        name = _user_name(user)
        stored = state.config.users.get(name) if name is not None else None
        address = client_address(remote)
        hashed = stored if stored is not None else state.dummies.hash_for(user)
        key = self._cache.key(address, user, hashed, password)
        if stored is not None and self._cache.fresh(key):
            return Verdict(name)
        outcome = self._checking.get(key)
        if outcome is None:
            budgeted = stored is None or not self._cache.remembered(key)
            if budgeted:
                wait = self._throttle.retry_after(address, user)
                if wait is not None:
                    return self._refuse("throttled", wait)
                self._throttle.spend(address, user)  # held until the check says what it was
            check = self._pool.submit(checkpw, password, hashed, address)
            if check is None:
                if budgeted:
                    self._throttle.refund(address, user)  # no check, no failed login
                return self._refuse("overloaded", OVERLOADED_RETRY_SECONDS)
            outcome = self._checking[key] = asyncio.get_running_loop().create_future()
            settle = functools.partial(self._settle, key, _Check(address, user, name, stored, budgeted), outcome)
            check.add_done_callback(settle)
        # Shielded: a client that leaves (a scrape timeout) cancels its wait, never the check.
        reason = await asyncio.shield(outcome)
        if reason is None:
            assert name is not None
            return Verdict(name)
        return self._refuse(reason, OVERLOADED_RETRY_SECONDS if reason == "overloaded" else None)

    def _settle(self, key: bytes, check: _Check, outcome: asyncio.Future[str | None], done: asyncio.Future[bool | None]) -> None:
        """A check ended: the budget and the cache as its result says, whoever still waits."""
        self._checking.pop(key, None)
        error = None if done.cancelled() else done.exception()
        ok = None if done.cancelled() or error is not None else done.result()
        if ok is None:  # dropped for a fairer check, or the pool closed: no login was tried
            reason: str | None = "overloaded"
        elif check.stored is None or check.name is None:
            reason = "unknown_user"
        elif not ok or self.state.config.users.get(check.name) != check.stored:  # a reload during the check may have changed it
            reason = "wrong_password"
        else:
            reason = None
            self._cache.add(key, check.name, check.stored)
        if check.budgeted and reason in (None, "overloaded"):
            self._throttle.refund(check.address, check.user)
        if outcome.done():
            return
        if error is not None:
            outcome.set_exception(error)
        else:
            outcome.set_result(reason)

    def _refuse(self, reason: str, retry_after: int | None = None) -> Verdict:
        self.count_failure(reason)
        return Verdict(None, reason, retry_after)

    def count_failure(self, reason: str) -> None:
        self.auth_failures[reason] = self.auth_failures.get(reason, 0) + 1

    def close(self) -> None:
        """Stop the bcrypt threads (checks still queued are dropped)."""
        self._pool.close()

    # --- the status part ---

    def part(self) -> WebStatus:
        """The reload and auth outcomes so far, for the web collector."""
        return WebStatus(
            self.last_reload_success,
            self.last_reload_success_time,
            tuple(sorted(self.reloads.items())),
            tuple(sorted(self.auth_failures.items())),
            self._pool.checks,
            self._pool.pending,
        )


def _user_name(user: bytes) -> str | None:
    try:
        return user.decode("utf-8")
    except UnicodeDecodeError:
        return None
