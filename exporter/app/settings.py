"""Settings: the options every package declares, read from one YAML file, `CANN_EXPORTER_*`
environment variables and flags (precedence: flag > environment > file > default).

Each package writes its options once (npusmi/options.py, hccn/options.py, ...) and its
registration names the section (its YAML key) and its `collector.*` switches; this module puts
the node-wide options and the table's sections together. :func:`build_settings` is pure and
lists every bad entry at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar

from exporter.app.sources import web_sources
from exporter.core.errors import ReasonError
from exporter.core.inputfile import KiB, read_text_input
from exporter.core.logs import LogOptions
from exporter.core.options import (
    ConfigError,
    Option,
    build,
    option,
    options_of,
    parse_bool,
    parse_duration,
    read_config,
    resolve,
    section,
)
from exporter.core.options import (
    load_yaml as _load_yaml,
)
from exporter.core.registration import Registration, Section, Switches, table_problems
from exporter.hooks.env import HOOK_ONLY
from exporter.jobs.options import INGEST_OPTIONS
from exporter.node.simulate import SimulatorOptions
from exporter.node.sources import SOURCES
from exporter.npusmi.faultcodes import FaultCodeError, load_fault_codes
from exporter.npusmi.options import NPU_SMI_OPTIONS
from exporter.web.options import WebOptions, listen_option

__all__ = [
    "OPTIONS",
    "OPTIONS_BY_KEY",
    "ConfigError",
    "Settings",
    "build_settings",
    "check_fault_codes",
    "load_ingest_token",
    "load_yaml",
    "read_config_file",
]

MAX_TOKEN_FILE_BYTES = 64 * KiB  # a bearer token is a line; a mounted secret is small


Opts = TypeVar("Opts")

# The node's sources and the web server's parts: their sections and collector.* switches.
TABLE: tuple[Registration[Any], ...] = (*SOURCES, *web_sources())
if problems := table_problems(TABLE):
    raise RuntimeError("the source table is inconsistent: " + "; ".join(problems))
SECTIONS: tuple[Section[Any], ...] = tuple(r.section for r in TABLE if r.section is not None)
SWITCH_OPTIONS: tuple[Option, ...] = tuple(
    Option(f"collector.{s.name}", parse_bool, s.default, s.help, serve_only=s.serve_only) for r in TABLE for s in r.switches
)


def _switches(values: Mapping[str, Any]) -> Switches:
    return Switches(MappingProxyType({o.key.removeprefix("collector."): values.get(o.key, o.parse(o.default)) for o in SWITCH_OPTIONS}))


@dataclass(frozen=True)
class Settings:
    """The node-wide options, then every registered source's section (``settings[SECTION]``)
    and the ``collector.*`` switches, both from the source table."""

    listen: tuple[str, int] = listen_option()
    web: WebOptions = section(WebOptions, serve_only=True)
    log: LogOptions = section(LogOptions)
    max_age: float = option(
        "180s", parse_duration, "data older than this is not served (must exceed the detail interval)", metavar="DURATION", serve_only=True
    )
    simulator: SimulatorOptions = section(SimulatorOptions)
    collector: Switches = field(default_factory=lambda: _switches({}))
    sources: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({s.key: s.options() for s in SECTIONS}))

    def __getitem__(self, section: Section[Opts]) -> Opts:
        """A registered source's options."""
        found = self.sources[section.key]
        if not isinstance(found, section.options):
            raise TypeError(f"{section.key}: {type(found).__name__}, not {section.options.__name__}")
        return found

    def replaced(self, section: Section[Opts], options: Opts) -> Settings:
        return replace(self, sources=MappingProxyType({**self.sources, section.key: options}))

    @property
    def listen_host(self) -> str:
        return self.listen[0]

    @property
    def listen_port(self) -> int:
        return self.listen[1]


OPTIONS: tuple[Option, ...] = (
    *options_of(Settings),
    *(o for s in SECTIONS for o in options_of(s.options, f"{s.key}.", serve_only=s.serve_only)),
    *SWITCH_OPTIONS,
)
OPTIONS_BY_KEY = {o.key: o for o in OPTIONS}


def value_of(settings: Settings, key: str) -> Any:
    """The value of one option of ``settings`` by its dotted key (``npu_smi.interval``)."""
    head, _, rest = key.partition(".")
    if head in settings.sources:
        return getattr(settings.sources[head], rest)
    if head == "collector":
        return settings.collector.on(rest)
    found = getattr(settings, head)
    return getattr(found, rest) if rest else found


def needs_restart(running: Settings, new: Settings) -> list[str]:
    """The keys whose new value takes effect only at a restart (every option but the live ones)."""
    return [o.key for o in OPTIONS if not o.live and value_of(running, o.key) != value_of(new, o.key)]


def load_yaml(text: str, origin: str = "config") -> dict[str, Any]:
    """A config file's text -> dotted keys; problems are ConfigError naming the file."""
    return _load_yaml(text, OPTIONS_BY_KEY, origin)


def read_config_file(path: str) -> dict[str, Any]:
    """The `--config` file -> dotted keys; ConfigError naming the file when it is refused
    (not a regular file, over 1 MiB, not UTF-8, a NUL byte, alias bombs: core/yamlfile.py)."""
    return read_config(path, OPTIONS_BY_KEY)


def build_settings(
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    origin: str = "config",
) -> Settings:
    """Merge defaults < file < environment < flags and validate every value."""
    values, problems = resolve(OPTIONS, file_values, env, flags, origin, other_env=HOOK_ONLY)
    if not problems:
        problems += _cross_checks(values)
    if problems:
        raise ConfigError(problems)
    return replace(
        build(Settings, values),
        collector=_switches(values),
        sources=MappingProxyType({s.key: build(s.options, values, f"{s.key}.") for s in SECTIONS}),
    )


def load_ingest_token(settings: Settings) -> Settings:
    """Settings with the token read from ``ingest.token_file`` (I/O, so outside build_settings)."""
    ingest = settings[INGEST_OPTIONS]
    path = ingest.token_file
    if path is None:
        return settings
    try:
        token = read_text_input(path, MAX_TOKEN_FILE_BYTES).strip()
    except ReasonError as exc:
        raise ConfigError([f"ingest.token_file: {exc.message}"]) from None
    if not token:
        raise ConfigError([f"ingest.token_file: {path} is empty"])
    return settings.replaced(INGEST_OPTIONS, replace(ingest, token=token))


def check_fault_codes(settings: Settings) -> None:
    """ConfigError naming each bad entry of ``npu_smi.fault_codes`` (I/O, so outside build_settings)."""
    path = settings[NPU_SMI_OPTIONS].fault_codes
    if path is None:
        return
    try:
        load_fault_codes(path)
    except FaultCodeError as exc:
        raise ConfigError([f"npu_smi.fault_codes: {problem}" for problem in exc.problems]) from None


def _cross_checks(values: Mapping[str, Any]) -> list[str]:
    problems = []
    if values["npu_smi.timeout"] > values["npu_smi.interval"] * 10:
        problems.append("npu_smi.timeout: should not exceed ten sampling intervals (npu_smi.interval)")
    slowest_key = "npu_smi.detail_interval" if values["npu_smi.details"] else "npu_smi.interval"
    slowest = values[slowest_key]
    if values["max_age"] <= slowest:
        problems.append(
            f"max_age: must exceed the slowest sampling interval ({slowest_key}, {slowest:g}s), or that data would always be dropped"
        )
    if values["podresources.ttl"] <= values["podresources.interval"]:
        problems.append("podresources.ttl: must exceed podresources.interval, or attribution would flicker")
    if values["ingest.token"] is not None and values["ingest.token_file"] is not None:
        problems.append("ingest.token, ingest.token_file: set one or the other, not both")
    return problems
