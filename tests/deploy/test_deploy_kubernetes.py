"""deploy/kubernetes: every overlay renders with `kubectl kustomize`, every object validates
against the Kubernetes schemas (kubernetes-validate), operator CRDs are checked structurally
here, and the security/wiring invariants of the DaemonSet hold."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.deploy import (
    K8S,
    ROOT,
    kustomize,
    promtool_check_config,
    require_module,
    run,
    tool,
)
from tests.support.prometheus import running

kubernetes_validate = require_module("kubernetes_validate", "pip install kubernetes-validate")

# Oldest schema bundled with kubernetes-validate and the newest: the manifests use nothing newer.
K8S_VERSIONS = ("1.25.0", kubernetes_validate.latest_version())
OVERLAYS = ("base", "overlays/prometheus-scrape", "overlays/tls-basic-auth")
COMPONENTS = ("privileged", "host-pid", "non-root", "sixteen-chips", "hardened-ingest")
ASSUMED_PODRESOURCES_KEYS = {
    "podresources.enabled",
    "podresources.socket",
    "podresources.timeout",
    "podresources.interval",
    "podresources.ttl",
    "podresources.resources",
    "podresources.device_id",
}
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"}


def _generate_module():
    spec = importlib.util.spec_from_file_location("k8s_generate", K8S / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_components(tmp_path: Path, *components: str) -> Path:
    """A throw-away kustomization: base plus the given components (paths relative, as kustomize wants)."""
    rel = lambda p: os.path.relpath(p, tmp_path)  # noqa: E731
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [rel(K8S / "base")],
        "components": [rel(K8S / "components" / c) for c in components],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    return {name: kustomize(K8S / name) for name in OVERLAYS}


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def daemonset(objects: list[dict]) -> dict:
    (ds,) = by_kind(objects, "DaemonSet")
    return ds


# --- schema validation -------------------------------------------------------------------------


def validate_all(objects: list[dict]) -> None:
    assert objects
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            check_crd(obj)
            continue
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} invalid for Kubernetes {version}: {exc.message}")


_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_ENDPOINT_KEYS = {
    "port",
    "targetPort",
    "path",
    "scheme",
    "params",
    "interval",
    "scrapeTimeout",
    "tlsConfig",
    "basicAuth",
    "authorization",
    "oauth2",
    "bearerTokenSecret",
    "honorLabels",
    "honorTimestamps",
    "relabelings",
    "metricRelabelings",
    "followRedirects",
    "enableHttp2",
    "proxyUrl",
}
_RELABEL_KEYS = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement", "action"}
_RELABEL_ACTIONS = {
    "replace",
    "keep",
    "drop",
    "hashmod",
    "labelmap",
    "labeldrop",
    "labelkeep",
    "lowercase",
    "uppercase",
    "keepequal",
    "dropequal",
}
_SECRET_KEY_REF = {"name", "key", "optional"}


def check_crd(obj: dict) -> None:
    """Prometheus Operator CRDs, checked against the fields of monitoring.coreos.com/v1 we use
    (kubernetes-validate has only the built-in kinds)."""
    version = "monitoring.coreos.com/v1alpha1" if obj["kind"] == "AlertmanagerConfig" else "monitoring.coreos.com/v1"
    assert obj["apiVersion"] == version, obj["apiVersion"]
    assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", obj["metadata"]["name"])
    spec = obj["spec"]
    if obj["kind"] == "AlertmanagerConfig":
        assert set(spec) == {"inhibitRules"}
        for rule in spec["inhibitRules"]:
            assert set(rule) == {"sourceMatch", "targetMatch", "equal"}
            for matcher in rule["sourceMatch"] + rule["targetMatch"]:
                assert {"name", "value"} <= set(matcher) <= {"name", "value", "matchType"}
                assert matcher.get("matchType", "=") in ("=", "!=", "=~", "!~")
                re.compile(matcher["value"])
            assert all(isinstance(label, str) for label in rule["equal"])
    elif obj["kind"] == "ServiceMonitor":
        assert set(spec) <= {"jobLabel", "selector", "namespaceSelector", "endpoints", "targetLabels", "podTargetLabels", "sampleLimit"}
        assert isinstance(spec["selector"]["matchLabels"], dict) and spec["selector"]["matchLabels"]
        assert spec["endpoints"]
        for endpoint in spec["endpoints"]:
            assert set(endpoint) <= _ENDPOINT_KEYS, set(endpoint) - _ENDPOINT_KEYS
            assert endpoint.get("scheme", "http") in ("http", "https")
            for key in ("interval", "scrapeTimeout"):
                if key in endpoint:
                    assert _DURATION.match(endpoint[key]), endpoint[key]
            for relabel in endpoint.get("relabelings", []) + endpoint.get("metricRelabelings", []):
                assert set(relabel) <= _RELABEL_KEYS and relabel.get("action", "replace") in _RELABEL_ACTIONS
            if "basicAuth" in endpoint:
                assert set(endpoint["basicAuth"]) == {"username", "password"}
                for ref in endpoint["basicAuth"].values():
                    assert set(ref) <= _SECRET_KEY_REF and {"name", "key"} <= set(ref)
            if "tlsConfig" in endpoint:
                assert set(endpoint["tlsConfig"]) <= {"ca", "cert", "keySecret", "serverName", "insecureSkipVerify"}
                assert set(endpoint["tlsConfig"]["ca"]) in ({"secret"}, {"configMap"})
    else:
        assert set(spec) == {"groups"} and isinstance(spec["groups"], list)
        for group in spec["groups"]:
            assert isinstance(group["name"], str) and isinstance(group["rules"], list)
            for rule in group["rules"]:
                assert ("alert" in rule) != ("record" in rule), rule
                assert isinstance(rule["expr"], (str, int, float))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(rendered: dict[str, list[dict]], overlay: str) -> None:
    validate_all(rendered[overlay])


@pytest.mark.parametrize("components", [(c,) for c in COMPONENTS] + [tuple(COMPONENTS)], ids=lambda c: "+".join(c))
def test_components_render_and_validate(tmp_path: Path, components: tuple[str, ...]) -> None:
    objects = kustomize(with_components(tmp_path, *components))
    validate_all(objects)
    spec = daemonset(objects)["spec"]["template"]["spec"]
    container = spec["containers"][0]
    if "privileged" in components:
        assert container["securityContext"]["privileged"] is True
    if "host-pid" in components:  # npu-smi lists the node's processes; the owner source reads their cgroups in /proc
        assert spec["hostPID"] is True
    assert not any(v.get("hostPath", {}).get("path") == "/proc" for v in spec["volumes"])  # /proc is the pod's (hostPID: the node's)
    if "non-root" in components:
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
        assert {"name": "CANN_EXPORTER_PODRESOURCES_ENABLED", "value": "false"} in container["env"]
    devices = sorted(
        m["mountPath"] for m in container["volumeMounts"] if m["mountPath"].startswith("/dev/davinci") and m["mountPath"][-1].isdigit()
    )
    assert len(devices) == (16 if "sixteen-chips" in components else 8)
    if "hardened-ingest" in components:
        check_hardened_ingest(objects)


INGEST_LABEL = {"cann-exporter/ingest": "true"}


def check_hardened_ingest(objects: list[dict]) -> None:
    """The token from a Secret (the exporter's own option), a node-local Service, and a
    NetworkPolicy that admits Prometheus and labelled training pods only."""
    from exporter.app.settings import OPTIONS_BY_KEY

    pod = daemonset(objects)["spec"]["template"]
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    token_file = env[OPTIONS_BY_KEY["ingest.token_file"].env_name]
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "ingest-token"]
    assert volume["secret"]["secretName"] == "cann-exporter-ingest-token" and not volume["secret"].get("optional")
    assert volume["secret"]["defaultMode"] == 0o440
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "ingest-token"]
    assert mount["readOnly"] is True and token_file == mount["mountPath"] + "/token"

    services = {s["metadata"]["name"]: s for s in by_kind(objects, "Service")}
    ingest = services["cann-exporter-ingest"]
    assert ingest["metadata"]["namespace"] == "cann-exporter"
    assert ingest["spec"]["internalTrafficPolicy"] == "Local" and ingest["spec"].get("clusterIP") != "None"
    assert ingest["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert {p["targetPort"] for p in ingest["spec"]["ports"]} <= {p["name"] for p in container["ports"]}

    (policy,) = by_kind(objects, "NetworkPolicy")
    assert policy["spec"]["egress"] == [] and policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
    assert all(set(peer) == {"namespaceSelector", "podSelector"} for peer in peers)  # no ipBlock, no "everyone"
    labels = [peer["podSelector"]["matchLabels"] for peer in peers]
    assert INGEST_LABEL in labels and {"app.kubernetes.io/name": "prometheus"} in labels
    assert all(p["port"] == "metrics" for rule in policy["spec"]["ingress"] for p in rule["ports"])


# --- the DaemonSet's contract -----------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_daemonset_is_locked_down(rendered: dict[str, list[dict]], overlay: str) -> None:
    ds = daemonset(rendered[overlay])
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert not sc.get("privileged") and sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert not pod.get("hostPID") and not pod.get("hostNetwork")
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    res = container["resources"]
    assert set(res["requests"]) == {"cpu", "memory"} and set(res["limits"]) == {"cpu", "memory"}
    assert container["args"][:3] == ["serve", "--config", "/etc/cann-exporter/config.yaml"]

    host_paths = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    mounted = {m["name"]: m for m in container["volumeMounts"]}
    for name, host_path in host_paths.items():
        assert mounted[name].get("readOnly") is True, f"hostPath {host_path['path']} mounted writable"
        assert host_path.get("type"), f"hostPath {host_path['path']} without a type could create it on the host"
    paths = {hp["path"] for hp in host_paths.values()}
    assert {
        "/dev/davinci_manager",
        "/dev/devmm_svm",
        "/dev/hisi_hdc",
        "/usr/local/bin/npu-smi",
        "/usr/local/dcmi",
        "/usr/local/Ascend/driver/lib64",
        "/var/lib/kubelet/pod-resources",
    } <= paths
    assert {f"/dev/davinci{i}" for i in range(8)} <= paths

    # The probes go to the health listener (web.health_listen): plain HTTP without credentials,
    # so httpGet works with TLS and basic auth on the metrics port too.
    probes = (container["livenessProbe"], container["readinessProbe"])
    if overlay == "overlays/tls-basic-auth":
        assert "--web.config.file=/etc/cann-exporter/web/web-config.yml" in container["args"]
    assert [p["httpGet"]["path"] for p in probes] == ["/healthz", "/readyz"]
    assert all(p["httpGet"]["port"] == "health" and "tcpSocket" not in p for p in probes)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    config_map = next(o for o in rendered[overlay] if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {}))
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config["web"]["health_listen"] == f":{ports['health']}"


def test_only_the_privileged_component_mentions_privileged() -> None:
    for path in K8S.rglob("*.yaml"):
        if "components/privileged" in path.as_posix():
            continue
        text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        assert "privileged: true" not in text, path


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_point_at_each_other(rendered: dict[str, list[dict]], overlay: str) -> None:
    objects = rendered[overlay]
    ds = daemonset(objects)
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    namespaces = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
    assert namespaces == {"cann-exporter"}
    (service,) = by_kind(objects, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    container_ports = {p["name"] for p in ds["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    (policy,) = by_kind(objects, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["egress"] == []
    assert {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]} <= container_ports

    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    configmaps = {o["metadata"]["name"]: o for o in by_kind(objects, "ConfigMap")}
    assert volumes["config"]["configMap"]["name"] in configmaps
    for monitor in by_kind(objects, "ServiceMonitor"):
        assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    dashboards = [c for c in configmaps.values() if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    assert dashboards, "no ConfigMap labelled for the Grafana sidecar"
    if overlay == "overlays/prometheus-scrape":
        assert not by_kind(objects, "ServiceMonitor") and not by_kind(objects, "PrometheusRule")
        assert not by_kind(objects, "AlertmanagerConfig")
        assert ds["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    else:
        assert by_kind(objects, "ServiceMonitor") and by_kind(objects, "PrometheusRule") and by_kind(objects, "AlertmanagerConfig")
    if overlay == "overlays/tls-basic-auth":
        secrets = {o["metadata"]["name"] for o in by_kind(objects, "Secret")}
        assert volumes["web-config"]["secret"]["secretName"] in secrets
        (monitor,) = by_kind(objects, "ServiceMonitor")
        assert monitor["spec"]["endpoints"][0]["scheme"] == "https"


def test_exporter_config_in_the_configmap() -> None:
    """Every key is an exporter option; podresources.* are the keys the lead adds (assumed until then)."""
    from exporter.app.settings import OPTIONS_BY_KEY, build_settings, load_yaml

    values = load_yaml((K8S / "base" / "config.yaml").read_text(), "config.yaml")
    pod_keys = {k for k in values if k.startswith("podresources.")}
    assert pod_keys <= ASSUMED_PODRESOURCES_KEYS
    assert values["podresources.enabled"] is True
    assert values["podresources.socket"] == "/var/lib/kubelet/pod-resources/kubelet.sock"
    if "podresources.enabled" in OPTIONS_BY_KEY:
        build_settings(values, origin="config.yaml")
    else:  # not wired yet: everything else must already be valid
        build_settings({k: v for k, v in values.items() if k not in pod_keys}, origin="config.yaml")


def test_tls_web_config_shape() -> None:
    doc = yaml.safe_load((K8S / "overlays" / "tls-basic-auth" / "web-config.yml").read_text())
    assert set(doc) == {"tls_server_config", "basic_auth_users"}
    assert doc["tls_server_config"]["cert_file"].startswith("/etc/cann-exporter/tls/")
    assert all(str(h).startswith("$2") for h in doc["basic_auth_users"].values())


def test_plain_prometheus_scrape_config_passes_promtool(tmp_path: Path) -> None:
    """promtool checks the job; Debian's promtool is built without Kubernetes service discovery
    ("field kubernetes_sd_configs not found"), so that block is checked here and swapped for a
    static target before promtool sees it."""
    jobs = yaml.safe_load((K8S / "overlays" / "prometheus-scrape" / "scrape-config.yaml").read_text())
    for job in jobs:
        for sd in job.pop("kubernetes_sd_configs"):
            assert set(sd) <= {"role", "namespaces", "selectors", "api_server", "kubeconfig_file", "attach_metadata"}
            assert sd["role"] in {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}
            assert set(sd["namespaces"]) <= {"names", "own_namespace"} and sd["namespaces"]["names"] == ["cann-exporter"]
            for selector in sd.get("selectors", []):
                assert selector["role"] == sd["role"] and set(selector) <= {"role", "label", "field"}
        job["static_configs"] = [{"targets": ["127.0.0.1:9435"]}]
    config = tmp_path / "prometheus.yml"
    rules = K8S / "overlays" / "prometheus-scrape" / "rules" / "cann-exporter.rules.yaml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "30s"}, "rule_files": [str(rules)], "scrape_configs": jobs}))
    promtool_check_config(config)


# --- generated parts: PrometheusRule from alerts/, dashboards from grafana/dashboards ---------


def test_generated_files_are_current() -> None:
    """deploy/kubernetes/generate.py output == the committed files (placeholders until alerts/ exists)."""
    stale = _generate_module().stale()
    assert not stale, f"run `python deploy/kubernetes/generate.py`; stale: {[str(p) for p in stale]}"


def _alert_files() -> list[Path]:
    alerts = ROOT / "alerts"
    return sorted([*alerts.glob("*.yaml"), *alerts.glob("*.yml")]) if alerts.is_dir() else []


@pytest.mark.skipif(
    not any("groups" in (yaml.safe_load(p.read_text()) or {}) for p in _alert_files()),
    reason="alerts/ has no rule files yet (generated by another issue)",
)
def test_prometheusrule_matches_alerts(rendered: dict[str, list[dict]], tmp_path: Path) -> None:
    generate = _generate_module()
    (rule,) = by_kind(rendered["base"], "PrometheusRule")
    assert rule["spec"]["groups"] == generate.rule_groups(ROOT / "alerts")
    names = {r.get("alert") for g in rule["spec"]["groups"] for r in g["rules"]} - {None}
    assert {"CANNExporterDown", "NPULowUtilization"} <= names
    out = tmp_path / "rules.yaml"
    out.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    proc = run([tool("promtool"), "check", "rules", str(out)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(
    not list((ROOT / "grafana" / "dashboards").glob("*.json")) if (ROOT / "grafana" / "dashboards").is_dir() else True,
    reason="grafana/dashboards has no dashboards yet (generated by another issue)",
)
def test_inhibit_rules_match_the_generator(rendered: dict[str, list[dict]]) -> None:
    """The AlertmanagerConfig of the base and the plain file of prometheus-scrape hold the rules
    of exporter/generate/inhibit.py, matcher for matcher."""
    from exporter.generate.inhibit import inhibit_rules

    expected = inhibit_rules()
    (config,) = by_kind(rendered["base"], "AlertmanagerConfig")
    text = lambda m: f'{m["name"]}{m.get("matchType", "=")}"{m["value"]}"'  # noqa: E731
    assert [
        {
            "source_matchers": [text(m) for m in r["sourceMatch"]],
            "target_matchers": [text(m) for m in r["targetMatch"]],
            "equal": r["equal"],
        }
        for r in config["spec"]["inhibitRules"]
    ] == expected
    (shipped,) = [
        c
        for c in by_kind(rendered["overlays/prometheus-scrape"], "ConfigMap")
        if c["metadata"]["name"].startswith("cann-exporter-prometheus")
    ]
    plain = yaml.safe_load(shipped["data"]["cann-exporter.inhibit.yml"])
    assert plain == {"inhibit_rules": expected}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "alertmanager.yml"
        path.write_text(yaml.safe_dump({"route": {"receiver": "default"}, "receivers": [{"name": "default"}], **plain}))
        proc = run([tool("amtool"), "check-config", str(path)])
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dashboard_configmaps_match_grafana(rendered: dict[str, list[dict]]) -> None:
    import json

    sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    shipped = {}
    for cm in by_kind(rendered["base"], "ConfigMap"):
        if cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
            shipped.update({name: json.loads(text) for name, text in cm.get("data", {}).items()})
    assert shipped == sources


def test_generator_with_rules_and_dashboards(tmp_path: Path) -> None:
    """What generate.py does once alerts/ and grafana/dashboards/ exist, on a copy of deploy/kubernetes."""
    import json
    import shutil

    generate = _generate_module()
    root = tmp_path / "repo"
    (root / "alerts" / "tests").mkdir(parents=True)
    (root / "grafana" / "dashboards").mkdir(parents=True)
    rules = {
        "groups": [
            {
                "name": "npu",
                "rules": [
                    {"alert": "NPUMissing", "expr": "npu_devices < 8", "for": "5m", "labels": {"severity": "warning"}},
                    {
                        "record": "instance:npu_aicore_utilization_ratio:avg",
                        "expr": "avg without (npu, chip, device) (npu_aicore_utilization_ratio)",
                    },
                ],
            }
        ]
    }
    (root / "alerts" / "npu.rules.yaml").write_text(yaml.safe_dump(rules))
    (root / "alerts" / "npu.tests.yaml").write_text(yaml.safe_dump({"rule_files": ["npu.rules.yaml"], "tests": []}))
    dashboard = {"uid": "npu-overview", "title": "NPU overview", "panels": []}
    (root / "grafana" / "dashboards" / "NPU Overview.json").write_text(json.dumps(dashboard))
    target = tmp_path / "kubernetes"
    shutil.copytree(K8S, target, ignore=shutil.ignore_patterns("generate.py", "__pycache__"))

    assert generate.stale(root, target)  # the committed placeholders no longer match
    generate.write(root, target)
    assert generate.stale(root, target) == []

    objects = kustomize(target / "base")
    (rule,) = by_kind(objects, "PrometheusRule")
    assert rule["spec"]["groups"] == rules["groups"]
    check_crd(rule)
    dashboards = [c for c in by_kind(objects, "ConfigMap") if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    assert [(c["metadata"]["name"], json.loads(c["data"]["NPU Overview.json"])) for c in dashboards] == [
        ("cann-exporter-dashboard-npu-overview", dashboard)
    ]
    plain = kustomize(target / "overlays" / "prometheus-scrape")
    (shipped,) = [c for c in by_kind(plain, "ConfigMap") if c["metadata"]["name"].startswith("cann-exporter-prometheus")]
    assert yaml.safe_load(shipped["data"]["cann-exporter.rules.yaml"]) == rules
    proc = run([tool("promtool"), "check", "rules", str(target / "overlays/prometheus-scrape/rules/cann-exporter.rules.yaml")])
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Dashboards removed upstream disappear from the copy too.
    (root / "grafana" / "dashboards" / "NPU Overview.json").unlink()
    generate.write(root, target)
    assert not list((target / "base" / "dashboards").glob("*.json"))


# --- runbook links and the node label --------------------------------------------------------

RUNBOOKS = "https://git.example.com/ops/cann-exporter/blob/main/docs/runbooks.md"


def _overlay_with_runbooks(tmp_path: Path, url: str | None) -> Path:
    doc: dict = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(K8S / "base", tmp_path)],
        "components": [os.path.relpath(K8S / "components" / "runbook-url", tmp_path)],
    }
    if url:
        doc["configMapGenerator"] = [
            {
                "name": "cann-exporter-runbook-url",
                "literals": [f"url={url}"],
                "options": {"disableNameSuffixHash": True, "annotations": {"config.kubernetes.io/local-config": "true"}},
            }
        ]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


def test_runbook_url_component_links_every_alert(tmp_path: Path) -> None:
    objects = kustomize(_overlay_with_runbooks(tmp_path, RUNBOOKS))
    validate_all(objects)
    (rule,) = by_kind(objects, "PrometheusRule")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and {r["annotations"]["runbook_url"] for r in alerts} == {f"{RUNBOOKS}#{r['alert'].lower()}" for r in alerts}
    records = [r for g in rule["spec"]["groups"] for r in g["rules"] if "record" in r]
    assert records and not any("annotations" in r for r in records)
    # the parameter is read by Kustomize, not applied
    assert not [o for o in objects if o["metadata"]["name"] == "cann-exporter-runbook-url"]


def test_runbook_url_component_without_the_url_names_it(tmp_path: Path) -> None:
    proc = run([tool("kubectl", "KUBECTL"), "kustomize", str(_overlay_with_runbooks(tmp_path, None))])
    assert proc.returncode != 0 and "cann-exporter-runbook-url" in proc.stderr


def _prometheus_relabel(relabel: dict) -> dict:
    """A ServiceMonitor relabeling as the relabel_config the operator writes for it."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {names.get(k, k): v for k, v in relabel.items()}


def test_node_label_from_the_kubernetes_metadata(rendered: dict[str, list[dict]], tmp_path: Path) -> None:
    """The shipped relabelings on a real Prometheus. Its Kubernetes discovery is swapped for
    file discovery giving the same meta labels (Debian's Prometheus has no Kubernetes SD):
    the pod's node name wins, the endpoint's stands in, and a target with neither gets no
    `node` (the dashboards then go by instance)."""
    groups = [
        {
            "targets": ["127.0.0.1:1"],
            "labels": {
                "__meta_kubernetes_pod_node_name": "worker-1",
                "__meta_kubernetes_endpoint_node_name": "stale-name",
                "__meta_kubernetes_pod_container_port_name": "metrics",
            },
        },
        {
            "targets": ["127.0.0.1:2"],
            "labels": {"__meta_kubernetes_endpoint_node_name": "worker-2", "__meta_kubernetes_pod_container_port_name": "metrics"},
        },
        {"targets": ["127.0.0.1:3"], "labels": {"__meta_kubernetes_pod_container_port_name": "metrics"}},
    ]
    (tmp_path / "targets.yml").write_text(yaml.safe_dump(groups))
    sd = [{"files": [str(tmp_path / "targets.yml")]}]
    jobs = [
        {
            "job_name": "servicemonitor-" + overlay.replace("/", "-"),
            "file_sd_configs": sd,
            "relabel_configs": [
                _prometheus_relabel(r) for r in by_kind(rendered[overlay], "ServiceMonitor")[0]["spec"]["endpoints"][0]["relabelings"]
            ],
        }
        for overlay in ("base", "overlays/tls-basic-auth")
    ]
    (plain,) = yaml.safe_load((K8S / "overlays" / "prometheus-scrape" / "scrape-config.yaml").read_text())
    jobs.append({"job_name": "plain", "file_sd_configs": sd, "relabel_configs": plain["relabel_configs"]})
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1h"}, "scrape_configs": jobs}))
    promtool_check_config(config)
    expected = {
        ("servicemonitor-base", "127.0.0.1:1"): "worker-1",
        ("servicemonitor-base", "127.0.0.1:2"): "worker-2",
        ("servicemonitor-base", "127.0.0.1:3"): None,
        ("plain", "127.0.0.1:1"): "worker-1",
        ("plain", "127.0.0.1:2"): None,
        ("plain", "127.0.0.1:3"): None,
    }
    expected |= {("servicemonitor-overlays-tls-basic-auth", t): v for (j, t), v in expected.items() if j == "servicemonitor-base"}
    with running(config, tmp_path / "data", tmp_path) as url:
        found: dict[tuple[str, str], str | None] = {}
        for _ in range(100):  # file discovery is read at start: a few polls at most
            with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as response:
                active = json.load(response)["data"]["activeTargets"]
            found = {(t["labels"]["job"], t["labels"]["instance"]): t["labels"].get("node") for t in active}
            if len(found) == len(expected):
                break
            time.sleep(0.1)
    assert found == expected


def test_the_base_links_runbooks_that_open_through_a_port_forward() -> None:
    """With nothing configured, every alert links the exporter's own /runbooks on localhost:9435
    (`kubectl port-forward`), at an anchor that page has."""
    from exporter.web.runbooks import render

    page = render((ROOT / "exporter" / "web" / "runbooks.md").read_text())
    anchors = set(re.findall(r'<h2 id="([^"]+)">', page))
    for path in ("base/prometheusrule.yaml", "overlays/prometheus-scrape/rules/cann-exporter.rules.yaml"):
        doc = yaml.safe_load((K8S / path).read_text())
        groups = doc["spec"]["groups"] if "spec" in doc else doc["groups"]
        links = [rule["annotations"]["runbook_url"] for group in groups for rule in group["rules"] if "alert" in rule]
        assert links and all(link.startswith("http://localhost:9435/runbooks#") for link in links), path
        assert {link.split("#", 1)[1] for link in links} <= anchors, path
    assert "port-forward daemonset/cann-exporter 9435" in (K8S / "README.md").read_text()
