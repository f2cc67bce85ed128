"""The TLS side of the web config: a server SSLContext from TLSServerConfig (reads the files),
one that new connections pick up after a reload, and the gate that bounds handshakes.

Certificate, key and CA files are opened through exporter.core.inputfile (regular files only,
never blocking on a FIFO, at most MAX_PEM_BYTES) and OpenSSL reads the descriptor that passed
the checks, through /proc/self/fd, not the path again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from exporter.core.inputfile import InputRefused, MiB, open_input, read_input
from exporter.web.config import (
    CIPHER_SUITES,
    TLS_VERSIONS,
    TLSServerConfig,
    WebConfigError,
)


def _no_password() -> bytes:
    # An encrypted key would make OpenSSL prompt on the terminal; fail instead.
    raise WebConfigError(["key_file is encrypted; give an unencrypted key (as exporter-toolkit needs too)"])


def _verify_mode(auth: str) -> ssl.VerifyMode:
    if auth == "VerifyClientCertIfGiven":
        return ssl.CERT_OPTIONAL
    if auth in ("RequireAnyClientCert", "RequireAndVerifyClientCert"):
        return ssl.CERT_REQUIRED
    return ssl.CERT_NONE  # NoClientCert; RequestClientCert (Go requests but never checks it)


# A certificate chain, a key or a CA bundle is a few KiB; a public CA bundle about 200 KiB.
MAX_PEM_BYTES = 1 * MiB


@contextlib.contextmanager
def _checked_paths(files: dict[str, Path]) -> Iterator[dict[str, str]]:
    """``{key: path}`` opened through inputfile; yields paths OpenSSL can read the same open
    files through. WebConfigError names every file refused."""
    problems: list[str] = []
    with contextlib.ExitStack() as stack:
        paths: dict[str, str] = {}
        for key, path in files.items():
            try:
                handle = stack.enter_context(open_input(path, MAX_PEM_BYTES))
            except InputRefused as exc:
                problems.append(f"tls_server_config.{key}: cannot read {path}: {exc.reason.replace('_', ' ')}")
                continue
            by_fd = f"/proc/self/fd/{handle.fileno()}"
            paths[key] = by_fd if os.path.exists(by_fd) else str(path)
        if problems:
            raise WebConfigError(problems)
        yield paths


def _read_ca(path: Path) -> str:
    try:
        return read_input(path, MAX_PEM_BYTES).decode("ascii", errors="replace")
    except InputRefused as exc:
        raise WebConfigError([f"tls_server_config.client_ca_file: cannot read {path}: {exc.reason.replace('_', ' ')}"]) from None


def build_ssl_context(tls: TLSServerConfig) -> ssl.SSLContext:
    """A server SSLContext for ``tls``; WebConfigError naming the file that does not load."""
    with _checked_paths({"cert_file": tls.cert_file, "key_file": tls.key_file}) as files:
        client_ca = _read_ca(tls.client_ca_file) if tls.client_ca_file is not None else None
        return _context(tls, files["cert_file"], files["key_file"], client_ca)


def _context(tls: TLSServerConfig, cert_file: str, key_file: str, client_ca_text: str | None) -> ssl.SSLContext:
    problems: list[str] = []
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = TLS_VERSIONS[tls.max_version]
    if tls.prefer_server_cipher_suites:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    openssl_names = [name for c in tls.cipher_suites if (name := CIPHER_SUITES[c])]
    try:
        if openssl_names:
            ctx.set_ciphers(":".join(openssl_names))
    except ssl.SSLError as exc:
        problems.append(f"tls_server_config.cipher_suites: none usable here: {exc}")
    try:
        ctx.load_cert_chain(cert_file, key_file, password=_no_password)
    except WebConfigError as exc:
        problems += exc.problems
    except (ssl.SSLError, OSError, ValueError) as exc:
        problems.append(
            f"tls_server_config.cert_file/key_file: {tls.cert_file}, {tls.key_file} do not load as a certificate and its key: {exc}"
        )
    for cadata in (client_ca_text, tls.client_ca or None):  # the file's text (even empty: refused), inline PEM
        if cadata is None:
            continue
        try:
            ctx.load_verify_locations(cadata=cadata)
        except (ssl.SSLError, OSError, ValueError) as exc:
            problems.append(f"tls_server_config.client_ca_file: no usable CA certificate: {exc}")
    if problems:
        raise WebConfigError(problems)
    ctx.verify_mode = _verify_mode(tls.client_auth_type)
    return ctx


class ReloadableSSLContext(ssl.SSLContext):
    """The context handed to the listener once; every new connection is set up from the
    context ``current`` holds at that moment, so a reload applies to the next handshake.

    asyncio's SSL transport creates each connection with ``wrap_bio``: delegating it is
    enough to swap certificates, CAs, verify mode, versions and ciphers as one.
    """

    current: ssl.SSLContext

    @classmethod
    def wrapping(cls, initial: ssl.SSLContext) -> ReloadableSSLContext:
        outer = cls(ssl.PROTOCOL_TLS_SERVER)
        outer.current = initial
        return outer

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return self.current.wrap_bio(incoming, outgoing, server_side=server_side, server_hostname=server_hostname, session=session)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self.current.wrap_socket(*args, **kwargs)


class Waiting(Protocol):
    """An admitted connection whose handshake has not started."""

    sock: socket.socket
    address: str | None  # its client's address (a share of the handshakes each)
    watching: bool  # its socket is watched for the first byte
    heard: bool  # its client has sent a byte
    gone: bool  # closed meanwhile (a deadline, an eviction): never started


# One address runs at most this fraction of the handshakes at once: the rest stay free for
# the others (a kubelet's TLS probe beside a client that stalls its ClientHellos).
ADDRESS_SHARE = 4


class HandshakeGate:
    """TLS handshakes, bounded: one starts on a connection's first byte (a client that sends
    nothing costs a socket, no TLS state) and at most ``limit`` run at once, at most a quarter
    of them (``per_address``) for one client address; the others wait in order, each under its
    connection's header deadline, and start as handshakes end, the first whose address is
    below its share first. When every handshake runs, a newcomer from an address below its
    share takes the place of the oldest handshake of an address at its share (``evict`` closes
    it): one address, however many handshakes it stalls, cannot keep another's waiting."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, limit: int, start: Callable[[Any], None], evict: Callable[[Any], None] = lambda conn: None
    ) -> None:
        self.loop, self.limit, self.start, self.evict = loop, limit, start, evict
        self.per_address = max(1, limit // ADDRESS_SHARE)
        self._running: dict[Waiting, None] = {}  # oldest first
        self._held: collections.Counter[str | None] = collections.Counter()  # address -> handshakes running
        self._queue: collections.deque[Waiting] = collections.deque()

    @property
    def running(self) -> int:
        return len(self._running)

    def held(self, address: str | None) -> int:
        """Handshakes ``address`` runs now."""
        return self._held[address]

    def watch(self, conn: Waiting) -> None:
        conn.watching = True
        self.loop.add_reader(conn.sock.fileno(), self._first_byte, conn)

    def unwatch(self, conn: Waiting) -> None:
        if conn.watching:
            conn.watching = False
            self.loop.remove_reader(conn.sock.fileno())

    def finished(self, conn: Waiting) -> None:
        """``conn``'s handshake ended (done, failed, cancelled or evicted): the next waiting one
        below its address's share starts. Called once more after an eviction: nothing then."""
        if conn not in self._running:
            return
        self._release(conn)
        while self._queue and len(self._running) < self.limit:
            waiting = next((c for c in self._queue if c.gone or self._held[c.address] < self.per_address), None)
            if waiting is None:
                return  # every address waiting holds its share: their turn comes as theirs end
            self._queue.remove(waiting)  # bounded by the connections open
            if not waiting.gone:
                self._begin(waiting)

    def _first_byte(self, conn: Waiting) -> None:
        self.unwatch(conn)
        conn.heard = True
        if self._held[conn.address] >= self.per_address:
            self._queue.append(conn)
        elif len(self._running) < self.limit:
            self._begin(conn)
        elif (hog := self._hog()) is not None:
            self._release(hog)
            self.evict(hog)
            self._begin(conn)
        else:
            self._queue.append(conn)

    def _hog(self) -> Waiting | None:
        """The oldest handshake of an address at its share, if any."""
        return next((c for c in self._running if not c.gone and self._held[c.address] >= self.per_address), None)

    def _begin(self, conn: Waiting) -> None:
        self._running[conn] = None
        self._held[conn.address] += 1
        self.start(conn)

    def _release(self, conn: Waiting) -> None:
        del self._running[conn]
        self._held[conn.address] -= 1
        if not self._held[conn.address]:
            del self._held[conn.address]
