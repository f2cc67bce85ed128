"""TLS, mTLS, basic auth, headers and reload against a real listening exporter app, with
certificates generated in the test (tests/webconfig/certs.py)."""

from __future__ import annotations

import asyncio
import os
import ssl
import statistics
import time

import aiohttp
import bcrypt
import pytest

from exporter.web import security
from tests.support.webconfig import HASH, PASSWORD, basic, tls_doc, write_web_config

GOOD = ("prometheus", PASSWORD)
JSON = {"Content-Type": "application/json"}
STEPS = {"job_name": "bert", "rank": 0, "steps": [{"duration": 0.1}]}


def users(**extra: str) -> dict:
    return {"basic_auth_users": {"prometheus": HASH, **extra}}


async def handshake_fails(running, ctx: ssl.SSLContext) -> bool:
    try:
        await running.get("/healthz", ctx)
    except (aiohttp.ClientConnectorError, aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, ssl.SSLError):
        return True
    return False


async def tls_version(running, ctx: ssl.SSLContext) -> str:
    return (await running.handshake(ctx)).version()


async def test_tls12_and_tls13_accepted_per_min_version(pki, serve, tmp_path):
    config = write_web_config(tmp_path / "web.yml", tls_doc(pki, min_version="TLS12"))
    running = await serve(config)
    assert await tls_version(running, pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"
    assert await tls_version(running, pki.client_context()) == "TLSv1.3"

    config13 = write_web_config(tmp_path / "web13.yml", tls_doc(pki, min_version="TLS13"))
    running13 = await serve(config13)
    assert await tls_version(running13, pki.client_context()) == "TLSv1.3"
    assert await handshake_fails(running13, pki.client_context(max_version=ssl.TLSVersion.TLSv1_2))


async def test_cipher_suites_restrict_tls12(pki, serve, tmp_path):
    doc = tls_doc(pki, max_version="TLS12", cipher_suites=["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"])
    running = await serve(write_web_config(tmp_path / "web.yml", doc))
    assert (await running.handshake(pki.client_context())).cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    ctx = pki.client_context()
    ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    assert await handshake_fails(running, ctx)


async def test_mtls_accepts_the_ca_s_clients_and_refuses_others(pki, serve, tmp_path):
    doc = tls_doc(pki, client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(pki.ca.cert))
    running = await serve(write_web_config(tmp_path / "web.yml", doc))
    assert (await running.get("/metrics", pki.client_context(pki.client)))[0] == 200
    assert await handshake_fails(running, pki.client_context())  # no certificate
    assert await handshake_fails(running, pki.client_context(pki.foreign_client))  # another CA's
    assert await handshake_fails(running, pki.client_context(pki.expired_client))  # expired


async def test_verify_client_cert_if_given(pki, serve, tmp_path):
    doc = tls_doc(pki, client_auth_type="VerifyClientCertIfGiven", client_ca_file=str(pki.ca.cert))
    running = await serve(write_web_config(tmp_path / "web.yml", doc))
    assert (await running.get("/metrics", pki.client_context()))[0] == 200  # none given: fine
    assert (await running.get("/metrics", pki.client_context(pki.client)))[0] == 200
    assert await handshake_fails(running, pki.client_context(pki.foreign_client))  # given and bad: refused


async def test_client_allowed_sans(pki, serve, tmp_path):
    base = {"client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": str(pki.ca.cert)}
    allowed = await serve(write_web_config(tmp_path / "a.yml", tls_doc(pki, **base, client_allowed_sans=["10.0.0.1"])))
    assert (await allowed.get("/metrics", pki.client_context(pki.client)))[0] == 200
    other = await serve(write_web_config(tmp_path / "b.yml", tls_doc(pki, **base, client_allowed_sans=["someone.else"])))
    assert (await other.get("/metrics", pki.client_context(pki.client)))[0] == 403
    assert other.security.auth_failures == {"client_san": 1}


async def test_an_expired_server_certificate_is_refused_by_verifying_clients(pki, serve, tmp_path):
    doc = {"tls_server_config": {"cert_file": str(pki.expired_server.cert), "key_file": str(pki.expired_server.key)}}
    running = await serve(write_web_config(tmp_path / "web.yml", doc))
    with pytest.raises(aiohttp.ClientConnectorCertificateError, match="expired"):
        await running.get("/healthz", pki.client_context())


async def test_basic_auth_over_tls(pki, serve, tmp_path):
    running = await serve(write_web_config(tmp_path / "web.yml", {**tls_doc(pki), **users()}))
    ctx = pki.client_context()
    status, body, headers = await running.get("/metrics", ctx, GOOD)
    assert status == 200 and "cann_exporter_web_config_last_reload_success 1.0" in body
    none = await running.get("/metrics", ctx)
    wrong = await running.get("/metrics", ctx, ("prometheus", "wrong"))
    unknown = await running.get("/metrics", ctx, ("mallory", PASSWORD))
    for status, body, headers in (none, wrong, unknown):
        assert status == 401 and body == "Unauthorized\n"
        assert headers["WWW-Authenticate"].startswith("Basic ")
    assert running.security.auth_failures == {"no_credentials": 1, "wrong_password": 1, "unknown_user": 1}
    for path in ("/", "/api/v1/openapi.yaml"):
        assert (await running.get(path, ctx))[0] == 401
    # Health endpoints stay open for kubelet probes (web.auth_exempt_health, the default).
    assert (await running.get("/healthz", ctx))[0] == 200
    assert (await running.get("/readyz", ctx))[0] == 503  # no sample yet, but not 401


async def test_health_endpoints_can_be_protected_too(pki, serve, tmp_path):
    running = await serve(write_web_config(tmp_path / "web.yml", users()), exempt_health=False)
    assert running.url.startswith("http://")  # basic auth alone, no TLS, works too
    assert (await running.get("/healthz", None))[0] == 401
    assert (await running.get("/healthz", None, GOOD))[0] == 200


async def test_unknown_user_and_wrong_password_take_the_same_path(pki, serve, tmp_path, monkeypatch):
    """Both run one bcrypt check of the same cost; the answers are identical."""
    cost = 8
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(cost)).decode()
    running = await serve(write_web_config(tmp_path / "web.yml", {"basic_auth_users": {"prometheus": hashed}}))
    assert running.security.state.dummies.cost_for(b"mallory") == cost
    checked: list[bytes] = []
    real = security.checkpw
    monkeypatch.setattr(security, "checkpw", lambda pw, h: checked.append(h) or real(pw, h))

    async def timed(auth: tuple[str, str]) -> float:
        start = time.perf_counter()
        assert (await running.get("/metrics", None, auth))[:2] == (401, "Unauthorized\n")
        return time.perf_counter() - start

    wrong, unknown = [], []
    for _ in range(5):
        wrong.append(await timed(("prometheus", "nope")))
        unknown.append(await timed(("mallory", "nope")))
    assert len(checked) == 10 and all(int(h.split(b"$")[2]) == cost for h in checked)
    assert 1 / 3 < statistics.median(unknown) / statistics.median(wrong) < 3


async def test_successful_checks_are_cached_failures_never(pki, serve, tmp_path, monkeypatch):
    running = await serve(write_web_config(tmp_path / "web.yml", users()))
    calls = []
    real = security.checkpw
    monkeypatch.setattr(security, "checkpw", lambda pw, h: calls.append(pw) or real(pw, h))
    for _ in range(3):
        assert (await running.get("/metrics", None, GOOD))[0] == 200
    assert len(calls) == 1  # scrapes stay cheap
    for _ in range(3):
        assert (await running.get("/metrics", None, ("prometheus", "guess")))[0] == 401
    assert len(calls) == 4  # every failed guess costs a bcrypt


async def test_ingest_is_protected_like_metrics(pki, serve, tmp_path):
    running = await serve(write_web_config(tmp_path / "web.yml", {**tls_doc(pki), **users()}), ingest_token="tok")
    ctx = pki.client_context()
    async with aiohttp.ClientSession() as session:

        async def post(**kwargs) -> tuple[int, dict]:
            headers = kwargs.pop("headers", None) or basic(kwargs.pop("auth", None))
            async with session.post(running.url + "/api/v1/steps", json=STEPS, ssl=ctx, headers=headers) as resp:
                return resp.status, await resp.json()

        status, body = await post()
        assert (status, body["reason"]) == (401, "unauthorized")
        assert (await post(auth=GOOD))[0] == 200  # basic auth stands in for the token
        assert (await post(headers={"Authorization": "Bearer tok"}))[0] == 200  # so does the hooks' token
        assert (await post(headers={"Authorization": "Bearer nope"}))[0] == 401
        assert (await post(auth=("prometheus", "nope")))[0] == 401


async def test_hooks_send_basic_auth_from_the_url(pki, serve, tmp_path, monkeypatch):
    from exporter.hooks.transport import Transport

    running = await serve(write_web_config(tmp_path / "web.yml", {**tls_doc(pki), **users()}))
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca.cert))  # how a training job trusts the exporter's CA
    url = running.url.replace("https://", f"https://prometheus:{PASSWORD}@")
    transport = Transport(url, None, timeout=5)
    import json

    reply = await asyncio.to_thread(transport.post, json.dumps(STEPS).encode())
    transport.close()
    assert reply.status == 200, reply.body


async def test_configured_headers_on_every_response(pki, serve, tmp_path):
    doc = {**users(), "http_server_config": {"headers": {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000"}}}
    running = await serve(write_web_config(tmp_path / "web.yml", doc))
    for path, auth in (("/metrics", GOOD), ("/metrics", None), ("/healthz", None), ("/nowhere", GOOD)):
        headers = (await running.get(path, None, auth))[2]
        assert headers["X-Frame-Options"] == "deny" and headers["Strict-Transport-Security"] == "max-age=31536000"


async def wait_until(condition, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.05)


def touch_later(path) -> None:
    """Make sure a rewrite changes the mtime even on coarse-grained filesystems."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_reload_applies_to_the_next_handshake_and_request(pki, serve, tmp_path):
    config = write_web_config(tmp_path / "web.yml", {**tls_doc(pki, min_version="TLS12"), **users()})
    running = await serve(config)
    tls12 = pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)
    assert (await running.get("/metrics", tls12, GOOD))[0] == 200

    # New rules: TLS 1.3 only, mTLS, another password. No restart.
    new_hash = bcrypt.hashpw(b"rotated", bcrypt.gensalt(4)).decode()
    doc = {
        **tls_doc(pki, min_version="TLS13", client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(pki.ca.cert)),
        "basic_auth_users": {"prometheus": new_hash},
    }
    write_web_config(config, doc)
    touch_later(config)
    await wait_until(lambda: running.security.reloads["success"] == 1)
    assert await handshake_fails(running, tls12)
    assert await handshake_fails(running, pki.client_context())  # no client cert now
    with_cert = pki.client_context(pki.client)
    assert (await running.get("/metrics", with_cert, GOOD))[0] == 401  # old password is gone
    status, body, _ = await running.get("/metrics", with_cert, ("prometheus", "rotated"))
    assert status == 200 and 'cann_exporter_web_config_reloads_total{result="success"} 1.0' in body


async def test_certificate_rotation_on_disk_is_picked_up(pki, serve, tmp_path):
    """cert-manager style: the config stays, the certificate files are replaced."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pki.expired_server.cert.read_bytes())
    key.write_bytes(pki.expired_server.key.read_bytes())
    config = write_web_config(tmp_path / "web.yml", {"tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key"}})
    running = await serve(config)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await running.get("/healthz", pki.client_context())
    key.write_bytes(pki.server.key.read_bytes())
    cert.write_bytes(pki.server.cert.read_bytes())
    touch_later(cert)
    await wait_until(lambda: running.security.reloads["success"] >= 1)
    assert (await running.get("/healthz", pki.client_context()))[0] == 200


@pytest.mark.parametrize(
    "broken",
    [
        "tls_server_config: [unclosed",  # not YAML
        "basic_auth_users: {prometheus: plaintext}",  # not a bcrypt hash
        "tls_server_config: {cert_file: missing.crt, key_file: missing.key}",
        "tls_server_config: {cert_file: CERT, key_file: CERT}",  # a certificate is not a key
        "basic_auth_users: {prometheus: HASH}",  # valid, but turns TLS off: needs a restart
    ],
)
async def test_a_broken_file_keeps_the_last_good_one(pki, serve, tmp_path, caplog, broken):
    config = write_web_config(tmp_path / "web.yml", {**tls_doc(pki), **users()})
    running = await serve(config)
    ctx = pki.client_context()
    config.write_text(broken.replace("CERT", str(pki.server.cert)).replace("HASH", HASH))
    touch_later(config)
    await wait_until(lambda: running.security.reloads["failure"] == 1)
    assert "web config reload failed; keeping the last good one" in caplog.text
    status, body, _ = await running.get("/metrics", ctx, GOOD)  # still TLS, same users
    assert status == 200 and "cann_exporter_web_config_last_reload_success 0.0" in body
    assert (await running.get("/metrics", ctx))[0] == 401
    await asyncio.sleep(0.3)
    assert running.security.reloads["failure"] == 1  # reported once, not per poll

    write_web_config(config, {**tls_doc(pki), **users()})  # fixed: back to success
    touch_later(config)
    await wait_until(lambda: running.security.last_reload_success)
    assert "cann_exporter_web_config_last_reload_success 1.0" in (await running.get("/metrics", ctx, GOOD))[1]
