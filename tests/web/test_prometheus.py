"""The same web config file in front of cann-exporter and of Prometheus itself (which reads
it with exporter-toolkit), and a real Prometheus scraping the exporter over mTLS with basic
auth: `up == 1` with the right password, `up == 0` with a wrong one."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.ports import free_port
from tests.support.serve import Exporter
from tests.support.tools import tool
from tests.support.webconfig import HASH, PASSWORD, write_web_config

pytestmark = pytest.mark.e2e


def query(base: str, promql: str, ctx: ssl.SSLContext, auth: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    request = urllib.request.Request(url, headers={"Authorization": auth})
    with urllib.request.urlopen(request, context=ctx, timeout=5) as resp:
        return json.load(resp)["data"]["result"]


def up_by_job(base: str, ctx: ssl.SSLContext, auth: str) -> dict[str, str]:
    return {r["metric"]["job"]: r["value"][1] for r in query(base, "up", ctx, auth)}


def start_prometheus(binary: str, tmp_path: Path, web_config: Path, exporter_port: int, pki) -> tuple[subprocess.Popen, int]:
    def job(name: str, password: str) -> dict:
        return {
            "job_name": name,
            "scheme": "https",
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "tls_config": {"ca_file": str(pki.ca.cert), "cert_file": str(pki.client.cert), "key_file": str(pki.client.key)},
            "basic_auth": {"username": "prometheus", "password": password},
            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
        }

    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [job("cann", PASSWORD), job("cann-wrong-password", "wrong")],
            }
        )
    )
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--web.config.file={web_config}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    return proc, port


def test_prometheus_scrapes_over_mtls_with_basic_auth_and_reads_the_same_file(pki, tmp_path):
    binary = tool("prometheus")  # before the exporter starts: a skip must leave nothing running
    web_config = write_web_config(
        tmp_path / "web.yml",
        {
            "tls_server_config": {
                "cert_file": str(pki.server.cert),
                "key_file": str(pki.server.key),
                "client_auth_type": "RequireAndVerifyClientCert",
                "client_ca_file": str(pki.ca.cert),
                "min_version": "TLS12",
            },
            "basic_auth_users": {"prometheus": HASH},
            "http_server_config": {"headers": {"X-Content-Type-Options": "nosniff"}},
        },
    )
    exporter = Exporter(["--simulate", "healthy", "--npu-smi.details=", "--web.config.file", str(web_config)], tmp_path)
    prometheus, port = start_prometheus(binary, tmp_path, web_config, exporter.port, pki)
    ctx = pki.client_context(pki.client)
    auth = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    base = f"https://127.0.0.1:{port}"
    try:
        end, found = time.monotonic() + 60, {}
        while found != {"cann": "1", "cann-wrong-password": "0"}:
            assert exporter.proc.poll() is None, exporter.log_path.read_text()
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
            assert time.monotonic() < end, (found, (tmp_path / "prometheus.log").read_text()[-2000:], exporter.log_path.read_text()[-2000:])
            time.sleep(0.5)
            try:
                found = up_by_job(base, ctx, auth)  # Prometheus' own API, behind the same web config
            except OSError:
                pass
        chips = query(base, 'count(npu_up{job="cann"} == 1)', ctx, auth)
        assert chips and chips[0]["value"][1] == "8"
        # Prometheus applies the file's rules to its own API as well.
        with pytest.raises(urllib.error.HTTPError, match="401"):
            query(base, "up", ctx, "Basic " + base64.b64encode(b"prometheus:wrong").decode())
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait()
        exporter.stop()
