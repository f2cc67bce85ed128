"""Settings from one YAML file, `CANN_EXPORTER_*` environment variables and flags.

Every option is declared once in OPTIONS; the YAML keys, flags, environment names, help
texts and validation all come from that table. Precedence: flag > environment > file >
default. :func:`build_settings` is pure and lists every bad entry at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from exporter.sources.npusmi import DETAIL_KINDS

ENV_PREFIX = "CANN_EXPORTER_"
SCENARIOS = ("healthy", "underutilized", "sawtooth", "degraded", "idle", "link-flap")
NETWORK_SCENARIOS = ("link-flap",)  # hccn_tool scenarios: npu-smi simulates their chips as healthy
MODELS = ("910b3", "a3", "310p-duo")
LOG_FORMATS = ("logfmt", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(Exception):
    """Bad configuration; ``problems`` names every bad key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# --- value parsers (raise ValueError with a message) ----------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """`10s`, `1.5m`, `500ms`, `2h` or a number of seconds; must be > 0."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 10s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"expected a duration like 10s, 1m or 500ms, got {value!r}")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not seconds > 0 or seconds == float("inf"):  # NaN fails `> 0`; YAML spells them .nan/.inf
        raise ValueError(f"must be a finite duration greater than zero, got {value!r}")
    return seconds


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def parse_positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a positive integer, got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a positive integer, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def parse_listen(value: Any) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` (all interfaces) or `[v6]:PORT`."""
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT or :PORT, got {value!r}")
    return host.strip("[]"), int(port)


def parse_text(value: Any) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not str(value).strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return str(value).strip()


def choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text
    return parse


def subset(*allowed: str) -> Callable[[Any], tuple[str, ...]]:
    """A YAML list or a comma-separated string, each item in ``allowed``."""
    def parse(value: Any) -> tuple[str, ...]:
        items = value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]
        out = tuple(str(item).strip() for item in items)
        bad = [item for item in out if item not in allowed]
        if bad:
            raise ValueError(f"unknown {', '.join(bad)}; expected any of {', '.join(allowed)}")
        return out
    return parse


def optional_text(value: Any) -> str | None:
    """A non-empty string, or unset (None or the empty string)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_text(value)


def text_list(value: Any) -> tuple[str, ...]:
    """A YAML list or a comma-separated string of non-empty items."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = tuple(str(item).strip() for item in items if str(item).strip())
    if not out:
        raise ValueError("expected at least one item")
    return out


def path_list(value: Any) -> tuple[str, ...]:
    """Directories: a YAML list, repeated flags, or a comma-separated string; may be empty."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


def auto_bool(value: Any) -> bool | None:
    """true, false, or auto (None: decided at start from the environment)."""
    if str(value).strip().lower() == "auto":
        return None
    return parse_bool(value)


def optional_scenario(value: Any) -> str | None:
    """A scenario name, `auto` (simulate only when npu-smi is missing), or off."""
    if value is None or value is False or str(value).strip().lower() in ("", "off", "false", "none"):
        return None
    return choice("auto", *SCENARIOS)(value)


# --- the option table -------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    key: str                 # dotted YAML key
    parse: Callable[[Any], Any]
    default: Any
    help: str
    flag: str | None = None  # default: --<key with _ as ->
    metavar: str | None = None
    repeatable: bool = False  # the flag may be given several times (a list)

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.key.replace("_", "-")

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + re.sub(r"[.\-]", "_", self.key).upper()


@dataclass(frozen=True)
class CollectorSpec:
    """One entry of the registration table: name, enabled by default, what it renders."""

    name: str
    default_enabled: bool
    help: str


COLLECTORS = (
    CollectorSpec("devices", True, "per-chip metrics from npu-smi"),
    CollectorSpec("processes", True, "per-process device memory from the npu-smi process table"),
    CollectorSpec("self", True, "the exporter's own health and build metrics"),
)

OPTIONS = (
    Option("listen", parse_listen, ":9435", "address to serve /metrics on, HOST:PORT or :PORT", metavar="HOST:PORT"),
    Option("web.config_file", optional_text, None, "exporter-toolkit web config (TLS, mTLS, basic auth, headers), the format node_exporter's --web.config.file reads; reloaded on change", flag="--web.config.file", metavar="FILE"),
    Option("web.auth_exempt_health", parse_bool, True, "serve /healthz and /readyz without basic auth (kubelet probes)"),
    Option("log.format", choice(*LOG_FORMATS), "logfmt", "log line format: logfmt or json"),
    Option("log.level", choice(*LOG_LEVELS), "info", "minimum log level"),
    Option("max_age", parse_duration, "180s", "data older than this is not served (must exceed the detail interval)", metavar="DURATION"),
    Option("npu_smi.path", parse_text, "npu-smi", "npu-smi binary (name on PATH or a path)", flag="--npu-smi", metavar="PATH"),
    Option("npu_smi.timeout", parse_duration, "10s", "kill an npu-smi call after this long", metavar="DURATION"),
    Option("npu_smi.interval", parse_duration, "10s", "how often `npu-smi info` reads every chip", metavar="DURATION"),
    Option("npu_smi.detail_interval", parse_duration, "60s", "how often the per-card `-t` details are read", metavar="DURATION"),
    Option("npu_smi.inventory_interval", parse_duration, "1h", "how often `info -m` and board ids are re-read (also on chip-set change)", metavar="DURATION"),
    Option("npu_smi.details", subset(*DETAIL_KINDS), "usages,common,ecc,health",
           "`-t` queries (per card; health per chip, only when not OK): " + ",".join(DETAIL_KINDS), metavar="LIST"),
    Option("npu_smi.board", parse_bool, True, "read `-t board -c` per chip at inventory time (die ids)"),
    Option("npu_smi.max_concurrency", parse_positive_int, 4, "npu-smi calls running at once", metavar="N"),
    Option("npu_smi.max_output_bytes", parse_positive_int, 4 << 20, "larger npu-smi outputs are discarded", metavar="BYTES"),
    Option("simulator.scenario", optional_scenario, None, "use the built-in simulator: " + ", ".join(SCENARIOS) + ", or auto (only when npu-smi is missing)", flag="--simulate", metavar="SCENARIO"),
    Option("simulator.model", choice(*MODELS), "910b3", "simulated node model: " + ", ".join(MODELS), flag="--simulate.model"),
    Option("ingest.enabled", parse_bool, True, "accept training-hook steps on POST /api/v1/steps (npu_job_* metrics)"),
    Option("ingest.token", optional_text, None, "bearer token the hooks must send (prefer ingest.token_file or the environment: flags show in ps)", metavar="TOKEN"),
    Option("ingest.token_file", optional_text, None, "file holding the bearer token (e.g. a mounted Kubernetes secret)", metavar="PATH"),
    Option("ingest.ttl", parse_duration, "30m", "a job rank that stops reporting is dropped after this (keep it above the stall alert window)", metavar="DURATION"),
    Option("ingest.finished_ttl", parse_duration, "60s", "a job rank whose hook closed is dropped after this", metavar="DURATION"),
    Option("ingest.max_jobs", parse_positive_int, 64, "distinct job_name values held at once; more are rejected (429)", metavar="N"),
    Option("ingest.max_ranks", parse_positive_int, 32, "ranks held per job; more are rejected (429)", metavar="N"),
    Option("ingest.max_body_bytes", parse_positive_int, 1 << 20, "larger POST bodies are rejected (413)", metavar="BYTES"),
    Option("profiles.dirs", path_list, (), "directories where torch_npu/msprof/MindSpore profiles land (repeatable)", flag="--profile-dir", metavar="DIR", repeatable=True),
    Option("profiles.state_file", optional_text, None, "remembers which profiles were parsed across restarts (default: in memory only)", flag="--profile-state-file", metavar="PATH"),
    Option("profiles.interval", parse_duration, "30s", "how often the profile directories are scanned", metavar="DURATION"),
    Option("profiles.settle", parse_duration, "30s", "an export without a finished marker must be untouched this long", metavar="DURATION"),
    Option("profiles.top_k", parse_positive_int, 5, "operator types reported per profile", metavar="N"),
    Option("podresources.enabled", auto_bool, "auto", "attribute chips to pods via the kubelet pod-resources API: auto (inside Kubernetes), true, false"),
    Option("podresources.socket", parse_text, "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet pod-resources socket", metavar="PATH"),
    Option("podresources.timeout", parse_duration, "3s", "bound on one List call", metavar="DURATION"),
    Option("podresources.interval", parse_duration, "15s", "how often the kubelet is asked", metavar="DURATION"),
    Option("podresources.ttl", parse_duration, "60s", "an answer is used this long; then attribution is dropped", metavar="DURATION"),
    Option("podresources.resources", text_list, "huawei.com/Ascend910,huawei.com/Ascend310P,huawei.com/Ascend310", "device-plugin resource names (virtual slices <name>-* included)", metavar="LIST"),
    Option("podresources.device_id", choice("physical", "logic"), "physical", "what the number ending a device id is: the chip's physical id (Ascend device plugin) or its logic id"),
    Option("hccn.enabled", auto_bool, "auto", "network/optics metrics from hccn_tool: auto (when hccn.path exists), true, false"),
    Option("hccn.path", parse_text, "/usr/local/Ascend/driver/tools/hccn_tool", "hccn_tool binary (name on PATH or a path)", flag="--hccn-tool", metavar="PATH"),
    Option("hccn.timeout", parse_duration, "5s", "kill an hccn_tool call after this long (it can wait 300 s on an unhealthy device)", metavar="DURATION"),
    Option("hccn.interval", parse_duration, "30s", "how often link, link_stat, speed, net_health and stat are read per chip", metavar="DURATION"),
    Option("hccn.slow_interval", parse_duration, "60s", "how often bandwidth (a ~1 s measurement), optical and ip are read per chip", metavar="DURATION"),
) + tuple(
    Option(f"collector.{c.name}", parse_bool, c.default_enabled, f"enable the {c.name} collector ({c.help})")
    for c in COLLECTORS
)

OPTIONS_BY_KEY = {o.key: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    listen_host: str
    listen_port: int
    log_format: str
    log_level: str
    max_age: float
    npu_smi_path: str
    npu_smi_timeout: float
    npu_smi_interval: float
    npu_smi_detail_interval: float
    npu_smi_inventory_interval: float
    npu_smi_details: tuple[str, ...]
    npu_smi_board: bool
    npu_smi_max_concurrency: int
    npu_smi_max_output_bytes: int
    simulator_scenario: str | None
    simulator_model: str
    collectors: frozenset[str]
    ingest_enabled: bool = True
    ingest_token: str | None = None        # from ingest.token, or read from ingest_token_file
    ingest_token_file: str | None = None
    ingest_ttl: float = 1800.0
    ingest_finished_ttl: float = 60.0
    ingest_max_jobs: int = 64
    ingest_max_ranks: int = 32
    ingest_max_body_bytes: int = 1 << 20
    profiles_dirs: tuple[str, ...] = ()
    profiles_state_file: str | None = None
    profiles_interval: float = 30.0
    profiles_settle: float = 30.0
    profiles_top_k: int = 5
    podresources_enabled: bool | None = None   # None: auto (on inside Kubernetes)
    podresources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock"
    podresources_timeout: float = 3.0
    podresources_interval: float = 15.0
    podresources_ttl: float = 60.0
    podresources_resources: tuple[str, ...] = ("huawei.com/Ascend910", "huawei.com/Ascend310P", "huawei.com/Ascend310")
    podresources_device_id: str = "physical"
    hccn_enabled: bool | None = None           # None: auto (when hccn_path exists)
    hccn_path: str = "/usr/local/Ascend/driver/tools/hccn_tool"
    hccn_timeout: float = 5.0
    hccn_interval: float = 30.0
    hccn_slow_interval: float = 60.0
    web_config_file: str | None = None       # exporter.webconfig; None: plain HTTP, no auth
    web_auth_exempt_health: bool = True


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """Nested YAML mapping -> dotted keys. Option values that are lists stay lists."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted not in OPTIONS_BY_KEY:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def load_yaml(text: str, origin: str = "config") -> dict[str, Any]:
    """Parse a config file's text; problems are ConfigError naming the file."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{origin}: not valid YAML: {exc}"]) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError([f"{origin}: the top level must be a mapping of keys"])
    return flatten(doc)


def build_settings(
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    origin: str = "config",
) -> Settings:
    """Merge defaults < file < environment < flags and validate every value."""
    problems: list[str] = []
    raw: dict[str, tuple[Any, str]] = {o.key: (o.default, "default") for o in OPTIONS}
    for key, value in (file_values or {}).items():
        if key not in OPTIONS_BY_KEY:
            problems.append(f"{origin}: unknown key {key!r}")
        else:
            raw[key] = (value, f"{origin}: {key}")
    env = env or {}
    for option in OPTIONS:
        if option.env_name in env:
            raw[option.key] = (env[option.env_name], option.env_name)
    for key, value in (flags or {}).items():
        if value is not None:
            raw[key] = (value, OPTIONS_BY_KEY[key].flag_name)

    values: dict[str, Any] = {}
    for key, (value, where) in raw.items():
        try:
            values[key] = OPTIONS_BY_KEY[key].parse(value)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    if not problems:
        problems += _cross_checks(values)
    if problems:
        raise ConfigError(problems)
    # Settings fields are the option keys with dots as underscores.
    fields = {k.replace(".", "_"): v for k, v in values.items() if k != "listen" and not k.startswith("collector.")}
    return Settings(
        listen_host=values["listen"][0],
        listen_port=values["listen"][1],
        collectors=frozenset(c.name for c in COLLECTORS if values[f"collector.{c.name}"]),
        **fields,
    )


def load_ingest_token(settings: Settings) -> Settings:
    """Settings with the token read from ``ingest.token_file`` (I/O, so outside build_settings)."""
    if settings.ingest_token_file is None:
        return settings
    try:
        token = Path(settings.ingest_token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"ingest.token_file: cannot read {settings.ingest_token_file}: {exc}"]) from None
    if not token:
        raise ConfigError([f"ingest.token_file: {settings.ingest_token_file} is empty"])
    return replace(settings, ingest_token=token)


def _cross_checks(values: Mapping[str, Any]) -> list[str]:
    problems = []
    if values["npu_smi.timeout"] > values["npu_smi.interval"] * 10:
        problems.append("npu_smi.timeout: should not exceed ten sampling intervals")
    slowest = values["npu_smi.detail_interval"] if values["npu_smi.details"] else values["npu_smi.interval"]
    if values["max_age"] <= slowest:
        problems.append(f"max_age: must exceed the slowest sampling interval ({slowest:g}s), or that data would always be dropped")
    if values["podresources.ttl"] <= values["podresources.interval"]:
        problems.append("podresources.ttl: must exceed podresources.interval, or attribution would flicker")
    if values["ingest.token"] is not None and values["ingest.token_file"] is not None:
        problems.append("ingest.token, ingest.token_file: set one or the other, not both")
    return problems
