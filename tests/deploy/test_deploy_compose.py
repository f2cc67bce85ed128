"""deploy/docker-compose and the Dockerfile. Docker does not run here: the compose file is
checked as data (services, profiles, mounts, ports), its Prometheus config with promtool and
its Alertmanager config with amtool."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from exporter.generate.inhibit import inhibit_rules
from tests.support.deploy import DEPLOY, ROOT, promtool_check_config, run, tool

COMPOSE_DIR = DEPLOY / "docker-compose"


def compose() -> dict:
    return yaml.safe_load((COMPOSE_DIR / "compose.yaml").read_text())


def host_side(volume: str) -> str:
    return volume.split(":", 1)[0]


def test_services_profiles_and_ports() -> None:
    doc = compose()
    services = doc["services"]
    assert set(services) == {"exporter", "exporter-npu", "rules", "prometheus", "alertmanager", "grafana"}
    assert services["exporter"]["profiles"] == ["simulator"]
    assert services["exporter-npu"]["profiles"] == ["npu"]
    assert "--simulate" in services["exporter"]["command"]
    assert "--simulate" not in services["exporter-npu"]["command"]
    for name in ("rules", "prometheus", "alertmanager", "grafana"):
        assert "profiles" not in services[name], f"{name} must start with either profile"
    ports = {name: [p.split(":")[0] for p in svc.get("ports", [])] for name, svc in services.items()}
    assert ports == {
        "exporter": ["9435"],
        "exporter-npu": ["9435"],
        "rules": [],
        "prometheus": ["9090"],
        "alertmanager": ["9093"],
        "grafana": ["3000"],
    }
    # The real npu-smi is the default (.env): the simulator only when asked for by name; both
    # exporters answer to `exporter` for Prometheus.
    env = dict(line.split("=", 1) for line in (COMPOSE_DIR / ".env").read_text().splitlines() if line and not line.startswith("#"))
    assert env["COMPOSE_PROFILES"] == "npu"
    assert services["exporter-npu"]["networks"]["default"]["aliases"] == ["exporter"]


def test_exporter_containers_are_locked_down() -> None:
    services = compose()["services"]
    for name in ("exporter", "exporter-npu"):
        svc = services[name]
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in svc["security_opt"]
        assert not svc.get("privileged")
        assert svc["build"]["context"] == "../.." and (COMPOSE_DIR / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
    npu = services["exporter-npu"]
    devices = {d.split(":")[0] for d in npu["devices"]}
    assert {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} | {f"/dev/davinci{i}" for i in range(8)} <= devices
    assert all(v.endswith(":ro") for v in npu["volumes"])
    assert "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro" in npu["volumes"]
    # npu-smi lists the host's processes, and the owner source reads their cgroups in /proc
    assert npu["pid"] == "host" and "pid" not in services["exporter"]
    assert not any("docker.sock" in v for v in npu["volumes"])  # root on the host: ids only


def test_mounts_point_at_the_repository() -> None:
    services = compose()["services"]
    prometheus = {host_side(v): v for v in services["prometheus"]["volumes"]}
    assert prometheus["generated"] == "generated:/etc/prometheus/generated:ro"
    grafana = {host_side(v): v for v in services["grafana"]["volumes"]}
    assert "../../grafana/dashboards" in grafana
    for volumes in (services["prometheus"]["volumes"], services["alertmanager"]["volumes"], services["grafana"]["volumes"]):
        for volume in volumes:
            source = host_side(volume)
            if source.startswith("./"):
                assert (COMPOSE_DIR / source).exists(), volume
    # Grafana provisioning: the datasource the dashboards use and the folder compose mounts.
    datasource = yaml.safe_load((COMPOSE_DIR / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    assert datasource["datasources"][0]["uid"] == "prometheus"
    provider = yaml.safe_load((COMPOSE_DIR / "grafana/provisioning/dashboards/cann-exporter.yaml").read_text())
    assert provider["providers"][0]["options"]["path"] == grafana["../../grafana/dashboards"].split(":")[1]


def test_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    config_path = COMPOSE_DIR / "prometheus" / "prometheus.yml"
    promtool_check_config(config_path)
    config = yaml.safe_load(config_path.read_text())
    targets = {t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    assert "exporter:9435" in targets and "alertmanager:9093" in targets


RUNBOOKS = "https://git.example.com/ops/cann-exporter/blob/main/docs/runbooks.md"


def _run_rules_service(out: Path, runbook_url: str) -> None:
    """The `rules` service's command, as compose runs it (its ${RUNBOOK_URL:-} filled in), with
    its volume at ``out``."""
    from exporter.cli import main

    service = compose()["services"]["rules"]
    volume = service["volumes"][0].split(":")[1]
    argv = [word.replace("${RUNBOOK_URL:-}", runbook_url).replace(volume, str(out)) for word in service["command"]]
    assert main(argv) == 0


def test_runbook_url_reaches_the_rules_prometheus_loads(tmp_path: Path) -> None:
    services = compose()["services"]
    rules = services["rules"]
    assert rules["image"] == services["exporter"]["image"] and rules["network_mode"] == "none"
    assert rules["read_only"] is True and rules["cap_drop"] == ["ALL"]
    assert rules["volumes"] == ["generated:/var/lib/cann-exporter/generated"]
    assert "install -d -o 10001 -g 10001 /var/lib/cann-exporter/generated" in (ROOT / "Dockerfile").read_text()
    assert services["prometheus"]["depends_on"] == {"rules": {"condition": "service_completed_successfully"}}
    env = dict(line.split("=", 1) for line in (COMPOSE_DIR / ".env").read_text().splitlines() if line and not line.startswith("#"))
    # by default the exporter's own /runbooks on the published port: opens with nothing configured
    assert env["RUNBOOK_URL"] == "http://localhost:9435/runbooks"
    assert "9435:9435" in services["exporter"]["ports"]
    # Prometheus' rule globs, pointed at what the service wrote, find the alerts with the links
    config = yaml.safe_load((COMPOSE_DIR / "prometheus" / "prometheus.yml").read_text())
    for url, link in ((RUNBOOKS, RUNBOOKS), (env["RUNBOOK_URL"], env["RUNBOOK_URL"]), ("", "docs/runbooks.md")):
        out = tmp_path / (url and f"linked{len(url)}" or "default")
        _run_rules_service(out, url)
        files = [f for g in config["rule_files"] for f in out.glob(g.removeprefix("/etc/prometheus/generated/"))]
        assert files
        alerts = [r for f in files for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"] if "alert" in r]
        assert alerts and {r["annotations"]["runbook_url"] for r in alerts} == {f"{link}#{r['alert'].lower()}" for r in alerts}
    # promtool on the configuration with those files
    config["rule_files"] = [
        str(tmp_path / f"linked{len(RUNBOOKS)}") + "/" + g.removeprefix("/etc/prometheus/generated/") for g in config["rule_files"]
    ]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    promtool_check_config(local)


def test_alertmanager_config_passes_amtool() -> None:
    proc = run([tool("amtool"), "check-config", str(COMPOSE_DIR / "alertmanager" / "alertmanager.yml")])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_alertmanager_config_carries_the_generated_inhibit_rules() -> None:
    config = yaml.safe_load((COMPOSE_DIR / "alertmanager" / "alertmanager.yml").read_text())
    assert config["inhibit_rules"] == inhibit_rules()


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    instructions = [line.split(None, 1) for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    froms = [rest for word, rest in instructions if word == "FROM"]
    assert all(f.startswith("python:3.11-slim") for f in froms)
    user = [rest for word, rest in instructions if word == "USER"][-1]
    assert user.split(":")[0] not in ("0", "root")
    assert "pip install" in text and re.search(r"pip install [^\n]*\.\s*$", text, re.M)
    healthcheck = text[text.index("HEALTHCHECK") :].split("\n\n")[0]
    assert "/healthz" in healthcheck and "9435" in healthcheck
    assert re.search(r"^EXPOSE 9435$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["cann-exporter"\]$', text, re.M)
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore and "!exporter/" in ignore and "!pyproject.toml" in ignore
    # Everything the build stage copies exists and passes the ignore file (the wheel carries LICENSE).
    copied = [name for word, rest in instructions if word == "COPY" and "--from" not in rest for name in rest.split()[:-1]]
    assert "LICENSE" in copied
    for name in copied:
        assert (ROOT / name).exists() and f"!{name.rstrip('/')}" in [entry.rstrip("/") for entry in ignore], name


def test_healthcheck_command_works_against_the_exporter(tmp_path: Path) -> None:
    """The HEALTHCHECK's Python one-liner exits 0 against a live /healthz and non-zero without one."""
    import json
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    text = (ROOT / "Dockerfile").read_text()
    argv = json.loads(re.search(r"CMD (\[\"python\".*\])", text).group(1))
    code = argv[2]

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Health)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ok = subprocess.run([sys.executable, "-c", code.replace("9435", str(port))], timeout=15)
        assert ok.returncode == 0
    finally:
        server.shutdown()
        server.server_close()
    down = subprocess.run([sys.executable, "-c", code.replace("9435", str(port))], capture_output=True, timeout=15)
    assert down.returncode != 0


def test_grafana_has_no_default_password():
    """An empty GRAFANA_ADMIN_PASSWORD stops `docker compose up` (`:?`) rather than opening admin/admin."""
    env = dict(line.split("=", 1) for line in (COMPOSE_DIR / ".env").read_text().splitlines() if line and not line.startswith("#"))
    assert env["GRAFANA_ADMIN_PASSWORD"] == ""
    grafana = yaml.safe_load((COMPOSE_DIR / "compose.yaml").read_text())["services"]["grafana"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
