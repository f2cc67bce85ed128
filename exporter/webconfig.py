"""`--web.config.file`: TLS, basic auth and response headers in the Prometheus
exporter-toolkit format, so one file serves this exporter and node_exporter & co alike.

```yaml
tls_server_config:
  cert_file: server.crt             # relative paths are relative to this file
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: clients-ca.crt
  min_version: TLS12
basic_auth_users:
  prometheus: $2y$10$...            # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
http_server_config:
  headers: {X-Frame-Options: deny}
```

Layers, each testable alone: :func:`parse_web_config` is pure (text in, a validated
:class:`WebConfig` out, or :class:`WebConfigError` listing every bad entry);
:func:`build_ssl_context` loads the files; :class:`WebSecurity` holds the live state,
re-reads the files when they change (keeping the last good state when they are broken),
authenticates requests and renders the `cann_exporter_web_*` self-metrics.

Differences from exporter-toolkit, all failing closed: Python's ssl module cannot accept a
client certificate without verifying it, so `RequireAnyClientCert` verifies against
`client_ca_file` (required) and `RequestClientCert` does not ask for one (Go would not
check it either); `cert`/`key` inline in the file are refused (use `cert_file`/`key_file`);
`curve_preferences`, `http2` and `rate_limit` are accepted and ignored (logged).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import bcrypt
import yaml
from aiohttp import web
from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.api import AUTHENTICATED_USER
from exporter.collectors import family

log = logging.getLogger("exporter.web")

CLIENT_AUTH_TYPES = (
    "NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert",
)
_CLIENT_AUTH_ALIASES = {"": "NoClientCert", "RequireClientCert": "RequireAnyClientCert"}  # toolkit's spellings
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's tls.CipherSuites() names -> OpenSSL names. TLS 1.3 suites are not configurable in Go
# either (None: accepted, nothing to set).
CIPHER_SUITES: Mapping[str, str | None] = MappingProxyType({
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",      # Go's older aliases
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
})
CURVES = ("CurveP256", "CurveP384", "CurveP521", "X25519")
# exporter-toolkit allows exactly these headers (and these values where it enumerates them).
HEADERS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
})
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
_BCRYPT_MAX_BYTES = 72       # bcrypt reads no further; Go truncates silently, and so do we
_TOP_KEYS = frozenset({"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"})
_TLS_KEYS = frozenset({
    "cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version", "cipher_suites",
    "prefer_server_cipher_suites", "curve_preferences", "client_allowed_sans", "cert", "key", "client_ca",
})
_HTTP_KEYS = frozenset({"http2", "headers"})

AUTH_CACHE_SECONDS = 120.0   # a verified credential skips bcrypt this long: scrapes stay cheap
AUTH_CACHE_SIZE = 256
RELOAD_POLL_SECONDS = 1.0


class WebConfigError(Exception):
    """A bad web configuration; ``problems`` names every bad entry."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class TLSServerConfig:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    client_ca: str | None = None              # inline PEM
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    cipher_suites: tuple[str, ...] = ()        # Go names
    prefer_server_cipher_suites: bool = True
    client_allowed_sans: tuple[str, ...] | None = None

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p is not None)


@dataclass(frozen=True)
class WebConfig:
    tls: TLSServerConfig | None = None
    users: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))  # user -> bcrypt hash
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    ignored: tuple[str, ...] = ()              # accepted for compatibility, not applied


# --- parsing (pure) --------------------------------------------------------------------------

class _Problems:
    """Collects problems so one pass reports every bad entry."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.origin}: {where}: {message}")


def _mapping(value: Any, where: str, problems: _Problems) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, f"expected a mapping, got {type(value).__name__}")
        return {}
    return value


def _unknown(doc: Mapping[Any, Any], allowed: frozenset[str], where: str, problems: _Problems) -> None:
    for key in doc:
        if key not in allowed:
            problems.add(f"{where}{key}", f"unknown key; expected one of {', '.join(sorted(allowed))}")


def _string(value: Any, where: str, problems: _Problems) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.add(where, f"expected a string, got {type(value).__name__}")
        return None
    return value


def _bool(value: Any, where: str, problems: _Problems, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.add(where, f"expected true or false, got {value!r}")
        return default
    return value


def _string_list(value: Any, where: str, problems: _Problems) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(where, "expected a list of strings")
        return None
    return tuple(value)


def _path(value: str | None, base_dir: Path) -> Path | None:
    if not value:
        return None
    return Path(value) if os.path.isabs(value) else base_dir / value


def _client_auth(text: Mapping[str, str | None], where: str, problems: _Problems) -> str:
    auth = _CLIENT_AUTH_ALIASES.get(text["client_auth_type"] or "", text["client_auth_type"] or "")
    if auth not in CLIENT_AUTH_TYPES:
        problems.add(where + "client_auth_type", f"{text['client_auth_type']!r} is not one of {', '.join(CLIENT_AUTH_TYPES)}")
        return "NoClientCert"
    has_ca = bool(text["client_ca_file"] or text["client_ca"])
    if has_ca and auth == "NoClientCert":
        problems.add(where + "client_auth_type", "client CAs are configured without a client auth policy")
    if not has_ca and auth in ("RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"):
        problems.add(where + "client_ca_file", f"{auth} needs client_ca_file (client certificates are verified against it)")
    return auth


def _versions(text: Mapping[str, str | None], where: str, problems: _Problems) -> tuple[str, str]:
    versions = {}
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        versions[key] = text[key] or default
        if versions[key] not in TLS_VERSIONS:
            problems.add(where + key, f"{versions[key]!r} is not one of {', '.join(TLS_VERSIONS)}")
            versions[key] = default
    if TLS_VERSIONS[versions["min_version"]] > TLS_VERSIONS[versions["max_version"]]:
        problems.add(where + "min_version", "is above max_version")
    return versions["min_version"], versions["max_version"]


def _ciphers(doc: Mapping[Any, Any], where: str, problems: _Problems) -> tuple[str, ...]:
    ciphers = _string_list(doc.get("cipher_suites"), where + "cipher_suites", problems) or ()
    for name in ciphers:
        if name not in CIPHER_SUITES:
            problems.add(where + "cipher_suites", f"unknown cipher {name!r} (Go names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
    for curve in _string_list(doc.get("curve_preferences"), where + "curve_preferences", problems) or ():
        if curve not in CURVES:
            problems.add(where + "curve_preferences", f"unknown curve {curve!r}; expected {', '.join(CURVES)}")
    return tuple(c for c in ciphers if c in CIPHER_SUITES)


def _parse_tls(doc: Mapping[Any, Any], base_dir: Path, problems: _Problems) -> TLSServerConfig | None:
    where = "tls_server_config."
    _unknown(doc, _TLS_KEYS, where, problems)
    text = {k: _string(doc.get(k), where + k, problems) for k in
            ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version", "cert", "key", "client_ca")}
    # exporter-toolkit: TLS is on as soon as any of these is set.
    if not any(text[k] for k in ("cert_file", "key_file", "client_ca_file", "client_auth_type", "cert", "key", "client_ca")):
        return None
    for inline, file_key in (("cert", "cert_file"), ("key", "key_file")):
        if text[inline]:
            problems.add(where + inline, f"inline certificates and keys are not supported here; use {file_key}")
        elif not text[file_key]:
            problems.add(where + file_key, "missing (TLS needs both cert_file and key_file)")
    if text["client_ca_file"] and text["client_ca"]:
        problems.add(where + "client_ca", "set client_ca_file or client_ca, not both")
    auth = _client_auth(text, where, problems)
    min_version, max_version = _versions(text, where, problems)
    sans = _string_list(doc.get("client_allowed_sans"), where + "client_allowed_sans", problems)
    if sans is not None and auth not in ("RequireAnyClientCert", "RequireAndVerifyClientCert"):
        problems.add(where + "client_allowed_sans", "requires client_auth_type RequireAnyClientCert or RequireAndVerifyClientCert")
    return TLSServerConfig(
        cert_file=_path(text["cert_file"], base_dir) or Path(),
        key_file=_path(text["key_file"], base_dir) or Path(),
        client_auth_type=auth,
        client_ca_file=_path(text["client_ca_file"], base_dir),
        client_ca=text["client_ca"] or None,
        min_version=min_version,
        max_version=max_version,
        cipher_suites=_ciphers(doc, where, problems),
        prefer_server_cipher_suites=_bool(doc.get("prefer_server_cipher_suites"), where + "prefer_server_cipher_suites", problems, True),
        client_allowed_sans=sans,
    )


def _parse_users(doc: Mapping[Any, Any], problems: _Problems) -> dict[str, bytes]:
    users: dict[str, bytes] = {}
    for name, hashed in doc.items():
        where = f"basic_auth_users.{name}"
        if isinstance(name, bool) or not isinstance(name, (str, int)) or not str(name):
            problems.add(where, "a user name must be a non-empty string")
            continue
        if ":" in str(name):
            problems.add(where, "a user name cannot contain ':' (basic auth splits on it)")
            continue
        if not isinstance(hashed, str) or not _BCRYPT_HASH.fullmatch(hashed):
            problems.add(where, "expected a bcrypt hash ($2y$10$ + 53 characters), not a plain password")
            continue
        users[str(name)] = hashed.encode("ascii")
    return users


def _parse_headers(doc: Mapping[Any, Any], problems: _Problems) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in doc.items():
        where = f"http_server_config.headers.{name}"
        if name not in HEADERS:
            problems.add(where, f"this header cannot be configured; allowed: {', '.join(HEADERS)}")
            continue
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            problems.add(where, "expected a single-line string")
            continue
        if HEADERS[name] and value not in HEADERS[name]:
            problems.add(where, f"{value!r} is not one of {', '.join(HEADERS[name])}")
            continue
        headers[name] = value
    return headers


def parse_web_config(text: str, base_dir: Path | str = ".", origin: str = "web config") -> WebConfig:
    """The file's text -> WebConfig (pure: reads no file). Raises WebConfigError only."""
    problems = _Problems(origin)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError([f"{origin}: not valid YAML: {exc}"]) from None
    except RecursionError:
        raise WebConfigError([f"{origin}: nested too deeply"]) from None
    doc = _mapping(doc, "top level", problems)
    _unknown(doc, _TOP_KEYS, "", problems)
    tls_doc = _mapping(doc.get("tls_server_config"), "tls_server_config", problems)
    tls = _parse_tls(tls_doc, Path(base_dir), problems)
    http = _mapping(doc.get("http_server_config"), "http_server_config", problems)
    _unknown(http, _HTTP_KEYS, "http_server_config.", problems)
    _bool(http.get("http2"), "http_server_config.http2", problems, True)
    headers = _parse_headers(_mapping(http.get("headers"), "http_server_config.headers", problems), problems)
    users = _parse_users(_mapping(doc.get("basic_auth_users"), "basic_auth_users", problems), problems)
    _mapping(doc.get("rate_limit"), "rate_limit", problems)
    if problems.items:
        raise WebConfigError(problems.items)
    ignored = [k for k in ("rate_limit",) if doc.get(k)]
    ignored += [f"http_server_config.{k}" for k in ("http2",) if k in http]
    ignored += [f"tls_server_config.{k}" for k in ("curve_preferences",) if k in tls_doc]
    return WebConfig(tls, MappingProxyType(users), MappingProxyType(headers), tuple(ignored))


# --- TLS (reads the certificate files) ---------------------------------------------------------

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


# --- loading (config + files) ------------------------------------------------------------------

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


# --- basic auth --------------------------------------------------------------------------------

def parse_basic(header: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) bytes from an `Authorization: Basic ...` header, or None."""
    if not header:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:_BCRYPT_MAX_BYTES], hashed)
    except ValueError:
        return False


class _SuccessCache:
    """Verified credentials, keyed by an HMAC so no password is kept; only successes are
    cached, so every failed guess still costs a full bcrypt."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._secret = secrets.token_bytes(32)
        self._entries: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def key(self, user: bytes, hashed: bytes, password: bytes) -> bytes:
        return hmac.new(self._secret, repr((user, hashed, password)).encode(), hashlib.sha256).digest()

    def hit(self, key: bytes) -> bool:
        with self._lock:
            expires = self._entries.get(key)
            return expires is not None and expires > self.clock()

    def add(self, key: bytes) -> None:
        with self._lock:
            now = self.clock()
            if len(self._entries) >= self.size:
                self._entries = {k: t for k, t in self._entries.items() if t > now}
                while len(self._entries) >= self.size:
                    del self._entries[next(iter(self._entries))]
            self._entries[key] = now + self.ttl

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


# --- the live state -------------------------------------------------------------------------------

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
        wall_clock: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.state = state
        self.exempt_paths = exempt_paths
        self.poll_interval = poll_interval
        self.wall_clock = wall_clock
        self.ssl_context = ReloadableSSLContext.wrapping(state.ssl_context) if state.ssl_context else None
        self.bearer_paths: frozenset[str] = frozenset()   # paths whose handler checks its own bearer token
        self._cache = _SuccessCache(cache_seconds, AUTH_CACHE_SIZE, clock)
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
            ok = await asyncio.to_thread(_checkpw, password, hashed)
        if not (ok and stored is not None):
            return None
        self._cache.add(key)
        return name

    def count_failure(self, reason: str) -> None:
        self.auth_failures[reason] = self.auth_failures.get(reason, 0) + 1

    # --- metrics ---

    def describe(self) -> Iterator[Metric]:
        for spec in m.WEB_METRICS:
            yield family(spec)

    def collect(self) -> Iterator[Metric]:
        success, last = family(m.WEB_CONFIG_RELOAD_SUCCESS), family(m.WEB_CONFIG_RELOAD_TIME)
        success.add_metric([], 1 if self.last_reload_success else 0)
        last.add_metric([], self.last_reload_success_time)
        reloads, failures = family(m.WEB_CONFIG_RELOADS), family(m.WEB_AUTH_FAILURES)
        for result, count in sorted(self.reloads.items()):
            reloads.add_metric([result], count)
        for reason, count in sorted(self.auth_failures.items()):
            failures.add_metric([reason], count)
        yield from (success, last, reloads, failures)


# --- aiohttp wiring ---------------------------------------------------------------------------

def _peer_sans(request: web.Request) -> set[str]:
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    out = set()
    for kind, value in (cert or {}).get("subjectAltName", ()):
        if kind == "IP Address":
            try:
                value = str(ipaddress.ip_address(value.strip()))  # Go prints IPs compressed
            except ValueError:
                pass
        out.add(value)
    return out


def _allowed_san(request: web.Request, allowed: tuple[str, ...]) -> bool:
    wanted = set()
    for value in allowed:
        try:
            wanted.add(str(ipaddress.ip_address(value)))
        except ValueError:
            wanted.add(value)
    return bool(_peer_sans(request) & wanted)


def _unauthorized(request: web.Request) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="cann-exporter", charset="UTF-8"'}
    if request.path.startswith("/api/"):
        return web.json_response({"error": "missing or wrong credentials (basic auth)", "reason": "unauthorized"}, status=401, headers=headers)
    return web.Response(status=401, text="Unauthorized\n", headers=headers)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def middleware(security: WebSecurity) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Basic auth (and client_allowed_sans) for every path but the exempt ones."""

    @web.middleware
    async def web_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        config = security.state.config
        sans = config.tls.client_allowed_sans if config.tls else None
        if sans is not None and not _allowed_san(request, sans):
            security.count_failure("client_san")
            return web.Response(status=403, text="client certificate not allowed\n")
        if not config.users or request.path in security.exempt_paths:
            return await handler(request)
        header = request.headers.get("Authorization")
        if request.path in security.bearer_paths and (header or "").lower().startswith("bearer "):
            return await handler(request)  # the handler checks its own token, in constant time
        user = await security.authenticate(header)
        if user is None:
            security.count_failure("no_credentials" if parse_basic(header) is None else "wrong_credentials")
            return _unauthorized(request)
        request[AUTHENTICATED_USER] = user
        return await handler(request)

    return web_auth


def install(app: web.Application, security: WebSecurity) -> None:
    """Auth middleware, configured response headers and the reload watcher on ``app``."""
    app.middlewares.append(middleware(security))

    async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
        for name, value in security.state.config.headers.items():
            response.headers.setdefault(name, value)

    app.on_response_prepare.append(add_headers)
