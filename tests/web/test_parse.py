"""parse_web_config (pure) and build_ssl_context: every bad entry named at once; the
exporter-toolkit format accepted as node_exporter reads it."""

from __future__ import annotations

import base64
import os
import shutil
import ssl

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.cli import main
from exporter.web.auth import parse_basic
from exporter.web.config import WebConfigError, parse_web_config
from exporter.web.security import load_web_config
from exporter.web.tls import build_ssl_context
from tests.support.webconfig import HASH, tls_doc, write_web_config

TOOLKIT_EXAMPLE = f"""
# The example of exporter-toolkit's docs/web-configuration.md, trimmed to what it documents.
tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: VerifyClientCertIfGiven
  client_ca_file: ca.crt
  min_version: TLS12
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]
  prefer_server_cipher_suites: true
  curve_preferences: [X25519, CurveP256]
http_server_config:
  http2: true
  headers:
    Content-Security-Policy: default-src 'self'
    X-Frame-Options: sameorigin
    X-Content-Type-Options: nosniff
    X-XSS-Protection: "1; mode=block"
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  alice: {HASH}
  "1234": {HASH}
"""


def test_the_toolkit_format_parses(tmp_path):
    config = parse_web_config(TOOLKIT_EXAMPLE, base_dir=tmp_path)
    assert config.tls is not None
    assert config.tls.cert_file == tmp_path / "server.crt"  # relative to the file
    assert config.tls.client_auth_type == "VerifyClientCertIfGiven"
    assert config.tls.cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
    assert set(config.users) == {"alice", "1234"}
    assert config.headers["X-Frame-Options"] == "sameorigin"
    assert set(config.ignored) == {"http_server_config.http2", "tls_server_config.curve_preferences"}


@pytest.mark.parametrize("text", ["", "{}", "basic_auth_users: {}", "tls_server_config: {}", "http_server_config: {headers: {}}"])
def test_empty_parts_mean_plain_http_without_auth(text):
    config = parse_web_config(text)
    assert config.tls is None and not config.users and not config.headers


def test_every_bad_entry_is_named_at_once():
    text = """
tls_server_config:
  cert_file: a.crt
  client_auth_type: RequireEverything
  min_version: TLS14
  cipher_suites: [RC4]
  curve_preferences: [P1]
  unknown_tls_key: 1
basic_auth_users:
  bob: hunter2
  "a:b": $2y$10$aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
http_server_config:
  headers:
    X-Powered-By: me
    X-Frame-Options: allow
extra: 1
"""
    with pytest.raises(WebConfigError) as err:
        parse_web_config(text, origin="web.yml")
    problems = "\n".join(err.value.problems)
    for needle in (
        "tls_server_config.key_file: missing",
        "client_auth_type: 'RequireEverything'",
        "min_version: 'TLS14'",
        "unknown cipher 'RC4'",
        "unknown curve 'P1'",
        "unknown_tls_key: unknown key",
        "basic_auth_users.bob: expected a bcrypt hash",
        "basic_auth_users.a:b: a user name cannot contain ':'",
        "X-Powered-By: this header cannot be configured",
        "X-Frame-Options: 'allow' is not one of",
        "extra: unknown key",
    ):
        assert needle in problems, needle
    assert all(p.startswith("web.yml: ") for p in err.value.problems)


@pytest.mark.parametrize(
    "tls, message",
    [
        ({"client_ca_file": "ca.crt"}, "without a client auth policy"),
        ({"client_auth_type": "RequireAndVerifyClientCert"}, "needs client_ca_file"),
        ({"client_auth_type": "RequireAnyClientCert"}, "needs client_ca_file"),
        (
            {"client_allowed_sans": ["x"], "client_auth_type": "VerifyClientCertIfGiven", "client_ca_file": "c"},
            "client_allowed_sans: requires",
        ),
        ({"min_version": "TLS13", "max_version": "TLS12"}, "is above max_version"),
        ({"cert": "-----BEGIN CERTIFICATE-----"}, "inline certificates and keys are not supported"),
        ({"prefer_server_cipher_suites": "yes"}, "expected true or false"),
    ],
)
def test_tls_rules(tls, message):
    doc = {"cert_file": "s.crt", "key_file": "s.key", **tls}
    with pytest.raises(WebConfigError, match=message):
        parse_web_config(f"tls_server_config: {doc!r}".replace("'", '"'))


def test_aliases_of_the_toolkit():
    config = parse_web_config("tls_server_config: {cert_file: a, key_file: b, client_auth_type: RequireClientCert, client_ca_file: c}")
    assert config.tls.client_auth_type == "RequireAnyClientCert"


def test_build_names_the_file_that_does_not_load(pki, tmp_path):
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    cases = {
        "missing": ({"cert_file": str(tmp_path / "nope.crt"), "key_file": str(tmp_path / "nope.key")}, "cannot read"),
        "swapped": ({"cert_file": str(pki.server.key), "key_file": str(pki.server.cert)}, "do not load as a certificate"),
        "bad ca": (
            {
                **tls_doc(pki)["tls_server_config"],
                "client_auth_type": "RequireAndVerifyClientCert",
                "client_ca_file": str(tmp_path / "garbage.pem"),
            },
            "client_ca_file: no usable CA",
        ),
    }
    for tls, message in cases.values():
        config = parse_web_config(repr({"tls_server_config": tls}).replace("'", '"'))
        with pytest.raises(WebConfigError, match=message):
            build_ssl_context(config.tls)


def test_hostile_certificate_files_are_refused_without_blocking(pki, tmp_path):
    """A FIFO (a plain open would block the reload for ever), /dev/zero (a read would never
    end) and a huge file are refused before OpenSSL reads a byte; the key is named."""
    os.mkfifo(tmp_path / "fifo.crt")
    (tmp_path / "zero.key").symlink_to("/dev/zero")
    with open(tmp_path / "huge.pem", "wb") as handle:
        handle.truncate(64 << 20)
    good = tls_doc(pki)["tls_server_config"]
    cases = {
        "fifo": ({**good, "cert_file": str(tmp_path / "fifo.crt")}, "cert_file: cannot read .*: not regular"),
        "dev zero": ({**good, "key_file": str(tmp_path / "zero.key")}, "key_file: cannot read .*: not regular"),
        "huge ca": (
            {**good, "client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": str(tmp_path / "huge.pem")},
            "client_ca_file: cannot read .*: too large",
        ),
    }
    for tls, message in cases.values():
        config = parse_web_config(repr({"tls_server_config": tls}).replace("'", '"'))
        with pytest.raises(WebConfigError, match=message):
            build_ssl_context(config.tls)


def test_client_auth_maps_to_verify_modes(pki):
    modes = {}
    for auth in ("NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"):
        extra = {} if auth in ("NoClientCert", "RequestClientCert") else {"client_ca_file": str(pki.ca.cert)}
        tls = {**tls_doc(pki)["tls_server_config"], "client_auth_type": auth, **extra}
        modes[auth] = build_ssl_context(parse_web_config(repr({"tls_server_config": tls}).replace("'", '"')).tls).verify_mode
    assert modes == {
        "NoClientCert": ssl.CERT_NONE,
        "RequestClientCert": ssl.CERT_NONE,
        "RequireAnyClientCert": ssl.CERT_REQUIRED,
        "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
        "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    }


def test_check_config_and_serve_refuse_a_bad_web_config(tmp_path, capsys):
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users: {bob: hunter2}\n")
    config = tmp_path / "config.yml"
    config.write_text(f"web:\n  config_file: {web}\nnpu_smi:\n  path: {shutil.which('true')}\n")
    assert main(["check-config", str(config)]) == 2
    assert "basic_auth_users.bob: expected a bcrypt hash" in capsys.readouterr().err
    assert main(["serve", "--web.config.file", str(web), "--simulate", "healthy"]) == 2
    assert "basic_auth_users.bob" in capsys.readouterr().err
    web.write_text(f"basic_auth_users: {{bob: '{HASH}'}}\n")
    assert main(["check-config", str(config)]) == 0


def test_load_reads_relative_paths_from_the_file_s_directory(pki, tmp_path):
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_bytes((pki.dir / name).read_bytes())
    config = write_web_config(tmp_path / "web.yml", {"tls_server_config": {"cert_file": "server.crt", "key_file": "server.key"}})
    state = load_web_config(config)
    assert state.ssl_context is not None and len(state.signature) == 3


# --- fuzzing: only WebConfigError escapes ---------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["TLS12", "TLS13", "NoClientCert", "RequireAndVerifyClientCert", HASH, "deny", "a.crt"]),
)
_KEYS = st.sampled_from(
    [
        "tls_server_config",
        "basic_auth_users",
        "http_server_config",
        "rate_limit",
        "headers",
        "cert_file",
        "key_file",
        "client_ca_file",
        "client_auth_type",
        "min_version",
        "max_version",
        "cipher_suites",
        "client_allowed_sans",
        "curve_preferences",
        "X-Frame-Options",
        "alice",
        "http2",
        "cert",
        "x",
    ]
)
_DOCS = st.recursive(
    _SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=5)), max_leaves=25
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_DOCS)
@example(doc={"tls_server_config": {"min_version": ["TLS12"]}})
@example(doc={"basic_auth_users": {None: HASH}})
@example(doc={"http_server_config": {"headers": {"X-Frame-Options": None}}})
def test_any_document_parses_or_raises_web_config_error(doc):
    try:
        parse_web_config(yaml.safe_dump(doc))
    except WebConfigError as exc:
        assert exc.problems and all(isinstance(p, str) for p in exc.problems)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
@example(text="tls_server_config: &a [*a]")  # a self-referencing alias
@example(text="- - - - - - - - - - - - - - - - - -")
@example(text="!!python/object:os.system {}")  # safe_load refuses it
def test_any_text_parses_or_raises_web_config_error(text):
    try:
        parse_web_config(text)
    except WebConfigError:
        pass


@given(header=st.one_of(st.none(), st.text(max_size=80), st.binary(max_size=60).map(lambda b: "Basic " + base64.b64encode(b).decode())))
@example(header="Basic")
@example(header="Basic =")
@example(header="basic Og==")  # ":" alone: empty user and password
def test_parse_basic_never_raises(header):
    result = parse_basic(header)
    assert result is None or (isinstance(result[0], bytes) and isinstance(result[1], bytes))


# --- response headers: only what HTTP can carry -----------------------------------------------------


@pytest.mark.parametrize(
    "value, where",
    [
        ("default-src \u201cself\u201d", "character U+201C at position 13"),  # curly quotes: not Latin-1
        ("max-age=1\r\nSet-Cookie: a=b", "character U+000D at position 10"),
        ("max-age=1\nX: y", "character U+000A at position 10"),
        ("a\x07b", "character U+0007 at position 2"),
        ("a\x7fb", "character U+007F at position 2"),
        ("caf\u00e9", "character U+00E9 at position 4"),  # obs-text: read differently by each client
        (" max-age=1", "leading or trailing whitespace"),
    ],
)
def test_a_header_value_http_cannot_carry_is_refused_naming_the_header(value, where):
    with pytest.raises(WebConfigError) as err:
        parse_web_config(yaml.safe_dump({"http_server_config": {"headers": {"Content-Security-Policy": value}}}))
    assert len(err.value.problems) == 1
    assert err.value.problems[0].startswith("web config: http_server_config.headers.Content-Security-Policy: ")
    assert where in err.value.problems[0]


@settings(max_examples=300, deadline=None)
@given(value=st.text(max_size=40))
@example(value="default-src 'self'; img-src *")
@example(value="a\tb")
def test_every_accepted_header_value_is_visible_ascii_on_one_line(value):
    try:
        config = parse_web_config(yaml.safe_dump({"http_server_config": {"headers": {"Content-Security-Policy": value}}}))
    except WebConfigError:
        return
    sent = config.headers["Content-Security-Policy"]
    assert sent.encode("ascii").decode("latin-1") == sent
    assert all(c == "\t" or " " <= c <= "~" for c in sent) and sent == sent.strip()


# --- bcrypt costs above 12: accepted with a warning ---------------------------------------------------


def _cost_hash(cost: int) -> str:
    return f"$2b${cost:02d}${'a' * 21}.{'b' * 31}"


def test_a_cost_above_12_loads_with_a_warning_saying_how_to_make_a_cost_12_hash():
    config = parse_web_config(yaml.safe_dump({"basic_auth_users": {"cheap": _cost_hash(12), "dear": _cost_hash(14)}}))
    assert set(config.users) == {"cheap", "dear"}
    assert len(config.warnings) == 1
    assert config.warnings[0].startswith("web config: basic_auth_users.dear: bcrypt cost 14 is above 12")
    assert "htpasswd -nBC 12" in config.warnings[0]


def test_check_config_prints_the_cost_warning_and_still_passes(tmp_path, capsys):
    web_yml = write_web_config(tmp_path / "web.yml", {"basic_auth_users": {"dear": _cost_hash(13)}})
    config = tmp_path / "config.yml"
    config.write_text(f"web:\n  config_file: {web_yml}\nnpu_smi:\n  path: /bin/true\n")
    assert main(["check-config", str(config)]) in (0, 3)
    err = capsys.readouterr().err
    assert "warning: " in err and "basic_auth_users.dear: bcrypt cost 13 is above 12" in err
