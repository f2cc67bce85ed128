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
`curve_preferences`, `http2` and `rate_limit` are accepted and ignored (logged); bcrypt
costs above MAX_BCRYPT_COST are refused (a check must fit in a scrape), above WARN_BCRYPT_COST
warned about; header values must be valid HTTP (checked here, not when the first answer fails).
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from exporter.core.errors import ProblemsError
from exporter.core.values import shown
from exporter.core.yamlfile import YamlRefused, parse_yaml

log = logging.getLogger("exporter.web")

CLIENT_AUTH_TYPES = (
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
)
_CLIENT_AUTH_ALIASES = {"": "NoClientCert", "RequireClientCert": "RequireAnyClientCert"}  # toolkit's spellings
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
# Go's tls.CipherSuites() names -> OpenSSL names. TLS 1.3 suites are not configurable in Go
# either (None: accepted, nothing to set).
CIPHER_SUITES: Mapping[str, str | None] = MappingProxyType(
    {
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
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",  # Go's older aliases
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    }
)
CURVES = ("CurveP256", "CurveP384", "CurveP521", "X25519")
# exporter-toolkit allows exactly these headers (and these values where it enumerates them).
HEADERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "Strict-Transport-Security": (),
        "X-Content-Type-Options": ("nosniff",),
        "X-Frame-Options": ("deny", "sameorigin"),
        "X-XSS-Protection": (),
        "Content-Security-Policy": (),
    }
)
# $2a$/$2b$/$2y$, a two-digit cost, 22 characters of salt, 31 of hash (bcrypt's base64).
_BCRYPT_HASH = re.compile(r"\$2[aby]\$([0-9]{2})\$([./A-Za-z0-9]{22})[./A-Za-z0-9]{31}")
_SALT_ENDS = ".Oeu"  # the salt's 22nd character holds 2 of its 128 bits; bcrypt refuses others
MIN_BCRYPT_COST = 4  # bcrypt's own minimum
# Each step doubles the work: cost 10 takes ~60 ms a check, 16 ~4 s, 17 ~8 s (most of
# Prometheus' 10 s scrape timeout, before any wait) and 31 ~1.5 days. An uncached check must
# fit in a scrape, so 16 is the most accepted; htpasswd -nBC 10 is a sound choice.
MAX_BCRYPT_COST = 16
# Above this a hash loads with a warning: a check of cost 13 or more holds a worker for half
# a second or more, and the few workers are shared with every guesser (cost 12: ~250 ms).
WARN_BCRYPT_COST = 12
_TOP_KEYS = frozenset({"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"})
_TLS_KEYS = frozenset(
    {
        "cert_file",
        "key_file",
        "client_ca_file",
        "client_auth_type",
        "min_version",
        "max_version",
        "cipher_suites",
        "prefer_server_cipher_suites",
        "curve_preferences",
        "client_allowed_sans",
        "cert",
        "key",
        "client_ca",
    }
)
_HTTP_KEYS = frozenset({"http2", "headers"})


class WebConfigError(ProblemsError):
    """A bad web configuration; ``problems`` names every bad entry."""


@dataclass(frozen=True)
class TLSServerConfig:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    client_ca: str | None = None  # inline PEM
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    cipher_suites: tuple[str, ...] = ()  # Go names
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
    ignored: tuple[str, ...] = ()  # accepted for compatibility, not applied
    warnings: tuple[str, ...] = ()  # accepted, but worth changing (logged, printed by check-config)


# --- parsing (pure) --------------------------------------------------------------------------


class _Problems:
    """Collects problems so one pass reports every bad entry."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.items: list[str] = []
        self.warnings: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.origin}: {where}: {message}")

    def warn(self, where: str, message: str) -> None:
        self.warnings.append(f"{self.origin}: {where}: {message}")


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
    if "\0" in value:  # no path or name holds one; the system calls would refuse it later
        problems.add(where, "contains a NUL character")
        return None
    if not value.isascii() and not _utf8(value):  # a "\ud800" escape: not text a path can hold
        problems.add(where, "contains a lone surrogate, not text")
        return None
    return value


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    text = {
        k: _string(doc.get(k), where + k, problems)
        for k in ("cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version", "max_version", "cert", "key", "client_ca")
    }
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
    """The users and their hashes; a warning in ``problems.warnings`` per costly hash."""
    users: dict[str, bytes] = {}
    for name, hashed in doc.items():
        where = f"basic_auth_users.{name}"
        if isinstance(name, bool) or not isinstance(name, (str, int)) or not str(name):
            problems.add(where, "a user name must be a non-empty string")
            continue
        if ":" in str(name):
            problems.add(where, "a user name cannot contain ':' (basic auth splits on it)")
            continue
        problem = _bcrypt_problem(hashed) if isinstance(hashed, str) else _NOT_A_HASH
        if problem is not None:
            problems.add(where, problem)
            continue
        users[str(name)] = hashed.encode("ascii")
        cost = int(hashed[4:6])
        if cost > WARN_BCRYPT_COST:
            problems.warn(
                where,
                f"bcrypt cost {cost} is above {WARN_BCRYPT_COST}: each uncached check holds one of the few "
                f"bcrypt workers for ~{0.25 * 2 ** (cost - WARN_BCRYPT_COST):g} s; make new hashes at cost "
                f"{WARN_BCRYPT_COST} with: htpasswd -nBC {WARN_BCRYPT_COST} \"\" | tr -d ':\\n'",
            )
    return users


_NOT_A_HASH = "expected a bcrypt hash ($2y$10$ + 53 characters), not a plain password"


def _bcrypt_problem(hashed: str) -> str | None:
    """Why ``hashed`` is not a usable bcrypt hash, or None. Checked at load: a check must never
    fail on a malformed hash (instantly, telling the user exists) nor hang on its cost."""
    match = _BCRYPT_HASH.fullmatch(hashed)
    if match is None:
        return _NOT_A_HASH
    cost = int(match.group(1))
    if cost < MIN_BCRYPT_COST:
        return f"bcrypt cost {cost} is below {MIN_BCRYPT_COST}, the least bcrypt allows"
    if cost > MAX_BCRYPT_COST:
        return (
            f"bcrypt cost {cost} is above {MAX_BCRYPT_COST}, the most accepted (each step doubles the work: "
            f"{MAX_BCRYPT_COST} takes ~4 s a check, 31 a day and a half); rehash with htpasswd -nBC 10"
        )
    if match.group(2)[-1] not in _SALT_ENDS:
        return f"not a hash bcrypt wrote: the salt's last character must be one of {' '.join(_SALT_ENDS)}"
    return None


def _header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value, or None. Visible ASCII, spaces and
    tabs only: a curly quote is not Latin-1 (the answer could not be encoded at all), and
    obs-text or a control character is read differently by every client."""
    for index, char in enumerate(value):
        if char == "\t" or " " <= char <= "~":
            continue
        return (
            f"character U+{ord(char):04X} at position {index + 1} is not allowed in an HTTP header value "
            "(visible ASCII, spaces and tabs only; write curly quotes as straight ones)"
        )
    if value != value.strip(" \t"):
        return "leading or trailing whitespace is not part of an HTTP header value"
    return None


def _parse_headers(doc: Mapping[Any, Any], problems: _Problems) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in doc.items():
        where = f"http_server_config.headers.{name}"
        if name not in HEADERS:
            problems.add(where, f"this header cannot be configured; allowed: {', '.join(HEADERS)}")
            continue
        if not isinstance(value, str):
            problems.add(where, f"expected a string, got {type(value).__name__}")
            continue
        problem = _header_value_problem(value)
        if problem is not None:
            problems.add(where, problem)
            continue
        if HEADERS[name] and value not in HEADERS[name]:
            problems.add(where, f"{shown(value)} is not one of {', '.join(HEADERS[name])}")
            continue
        headers[name] = value
    return headers


def parse_web_config(text: str, base_dir: Path | str = ".", origin: str = "web config") -> WebConfig:
    """The file's text -> WebConfig (pure: reads no file). Raises WebConfigError only."""
    problems = _Problems(origin)
    try:
        doc = parse_yaml(text, origin)
    except YamlRefused as exc:
        raise WebConfigError([exc.message]) from None
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
    return WebConfig(tls, MappingProxyType(users), MappingProxyType(headers), tuple(ignored), tuple(problems.warnings))
