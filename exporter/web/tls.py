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
    watching: bool  # its socket is watched for the first byte
    heard: bool  # its client has sent a byte
    gone: bool  # closed meanwhile (a deadline, an eviction): never started


class HandshakeGate:
    """TLS handshakes, bounded: one starts on a connection's first byte (a client that sends
    nothing costs a socket, no TLS state) and at most ``limit`` run at once; the others wait in
    order, each under its connection's header deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int, start: Callable[[Any], None]) -> None:
        self.loop, self.limit, self.start = loop, limit, start
        self.running = 0
        self._queue: collections.deque[Waiting] = collections.deque()

    def watch(self, conn: Waiting) -> None:
        conn.watching = True
        self.loop.add_reader(conn.sock.fileno(), self._first_byte, conn)

    def unwatch(self, conn: Waiting) -> None:
        if conn.watching:
            conn.watching = False
            self.loop.remove_reader(conn.sock.fileno())

    def finished(self) -> None:
        """A handshake ended (done, failed or cancelled): the next waiting one starts."""
        self.running -= 1
        while self._queue and self.running < self.limit:
            waiting = self._queue.popleft()
            if not waiting.gone:
                self._begin(waiting)

    def _first_byte(self, conn: Waiting) -> None:
        self.unwatch(conn)
        conn.heard = True
        if self.running < self.limit:
            self._begin(conn)
        else:
            self._queue.append(conn)

    def _begin(self, conn: Waiting) -> None:
        self.running += 1
        self.start(conn)
