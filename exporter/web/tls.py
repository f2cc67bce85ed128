"""The TLS side of the web config: a server SSLContext from TLSServerConfig (reads the files),
and one that new connections pick up after a reload."""

from __future__ import annotations

import os
import ssl
from typing import Any

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


def build_ssl_context(tls: TLSServerConfig) -> ssl.SSLContext:
    """A server SSLContext for ``tls``; WebConfigError naming the file that does not load."""
    problems = [f"tls_server_config.{key}: cannot read {path}" for key, path in
                (("cert_file", tls.cert_file), ("key_file", tls.key_file), ("client_ca_file", tls.client_ca_file))
                if path is not None and not os.access(path, os.R_OK)]
    if problems:
        raise WebConfigError(problems)
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
        ctx.load_cert_chain(tls.cert_file, tls.key_file, password=_no_password)
    except WebConfigError as exc:
        problems += exc.problems
    except (ssl.SSLError, OSError, ValueError) as exc:
        problems.append(f"tls_server_config.cert_file/key_file: {tls.cert_file}, {tls.key_file} do not load as a certificate and its key: {exc}")
    if tls.client_ca_file is not None or tls.client_ca:
        try:
            ctx.load_verify_locations(cafile=tls.client_ca_file, cadata=tls.client_ca)
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

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, server_side: bool = False,  # type: ignore[override]
                 server_hostname: str | None = None, session: ssl.SSLSession | None = None) -> ssl.SSLObject:
        return self.current.wrap_bio(incoming, outgoing, server_side=server_side, server_hostname=server_hostname, session=session)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        return self.current.wrap_socket(*args, **kwargs)
