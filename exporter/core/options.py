"""Options: each package declares its settings once, as a frozen dataclass of :func:`option` fields.

A field's default, parser, help text and flag are written in one place; from the dataclasses
come the YAML keys (``npu_smi.timeout``), the flags (``--npu-smi.timeout``), the environment
names (``CANN_EXPORTER_NPU_SMI_TIMEOUT``), ``--help`` and validation. A settings class nests
sections with :func:`section`. :func:`resolve` merges defaults < file < environment < flags,
validates every value and lists every bad entry at once (:class:`ConfigError`).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from exporter.core.errors import ProblemsError, ReasonError
from exporter.core.values import parse_duration as _parse_duration
from exporter.core.values import shown
from exporter.core.yamlfile import parse_yaml, read_yaml

ENV_PREFIX = "CANN_EXPORTER_"
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

S = TypeVar("S")
Parse = Callable[[Any], Any]


class ConfigError(ProblemsError):
    """Bad configuration; ``problems`` names every bad key."""


# --- value parsers (each raises ValueError with a message) -------------------------------------

# No option needs more: a year-long interval or timeout is a typo, and far larger ones
# overflow the clocks and timers they reach (threading, select and asyncio take C doubles
# or 64-bit nanoseconds).
MAX_DURATION_SECONDS = 366 * 86400.0
# Counts and byte sizes end up in C calls (read sizes, semaphores, rlimits): 64-bit signed.
MAX_INT = 2**63 - 1


def parse_duration(value: Any) -> float:
    """`10s`, `1.5m`, `500ms`, `2h` or a number of seconds; must be > 0 and at most a year."""
    seconds = _parse_duration(value)
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"must be at most 366d, got {shown(value)}")
    return seconds


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {shown(value)}")


_DIGITS = re.compile(r"\+?[0-9]{1,19}", re.ASCII)


def whole_number(low: int, high: int) -> Parse:
    """A parser for whole numbers from ``low`` to ``high`` (at most 2**63-1), written as decimal
    digits (YAML or text); nothing else is read, so huge or fractional values never reach int()."""
    wanted = f"a positive integer up to {high}" if low == 1 else f"a whole number from {low} to {high}"

    def parse(value: Any) -> int:
        text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
        if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(f"expected {wanted}, got {shown(value)}")
        return int(text)

    return parse


parse_positive_int = whole_number(1, MAX_INT)


def parse_listen(value: Any) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` (all interfaces) or `[v6]:PORT`; port 0 lets the kernel choose."""
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or len(port) > 5 or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT or :PORT (port 0 to 65535), got {shown(value)}")
    host = host.strip("[]")
    problem = _host_problem(host)
    if problem:
        raise ValueError(f"expected HOST:PORT or :PORT, {problem}, got {shown(value)}")
    return host, int(port)


_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")  # "_": compose and /etc/hosts names


def _host_problem(host: str) -> str | None:
    """Why ``host`` is neither empty (every interface), an IP address nor a DNS name, or None.
    Checked here because the resolver's IDNA step raises UnicodeError on a bad label."""
    if not host:
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if len(host) > 253:
        return "the host name is longer than 253 characters"
    labels = host.removesuffix(".").split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return "the host is not an IP address or a host name (labels of 1 to 63 letters, digits, underscores or inner hyphens)"
    return None


def parse_text(value: Any) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not str(value).strip():
        raise ValueError(f"expected a non-empty string, got {shown(value)}")
    return str(value).strip()


def choice(*allowed: str) -> Parse:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {shown(value)}")
        return text

    parse.choices = allowed  # type: ignore[attr-defined]  # the flag's metavar reads them
    return parse


def subset(*allowed: str) -> Parse:
    """A YAML list or a comma-separated string, each item in ``allowed``."""

    def parse(value: Any) -> tuple[str, ...]:
        out = tuple(item for item in _items(value) if item)
        bad = [shown(item) for item in out if item not in allowed]
        if bad:
            raise ValueError(f"unknown {', '.join(bad[:5])}; expected any of {', '.join(allowed)}")
        return out

    return parse


def optional_text(value: Any) -> str | None:
    """A non-empty string, or unset (None or the empty string)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_text(value)


def text_list(value: Any) -> tuple[str, ...]:
    """A YAML list or a comma-separated string of non-empty items."""
    out = tuple(item for item in _items(value) if item)
    if not out:
        raise ValueError("expected at least one item")
    return out


def path_list(value: Any) -> tuple[str, ...]:
    """Directories: a YAML list, repeated flags, or a comma-separated string; may be empty."""
    return tuple(item for item in _items(value) if item)


def _items(value: Any) -> list[str]:
    """The stripped items of a YAML list or a comma-separated string; nested values refused."""
    if isinstance(value, (list, tuple)):
        if not all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in value):
            raise ValueError("expected a list of names or paths, not of lists or mappings")
        return [str(item).strip() for item in value]
    if isinstance(value, (dict, set, bytes)):
        raise ValueError(f"expected a list or a comma-separated string, got {type(value).__name__}")
    return [item.strip() for item in str(value).split(",")]


def auto_bool(value: Any) -> bool | None:
    """true, false, or auto (None: decided at start from the environment)."""
    if str(value).strip().lower() == "auto":
        return None
    return parse_bool(value)


# --- declaring options -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Declared:
    parse: Parse
    default: Any  # as written (shown in --help), before parsing
    help: str
    flag: str | None
    metavar: str | None
    repeatable: bool
    serve_only: bool
    default_text: str | None
    live: bool


def option(
    default: Any,
    parse: Parse,
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    repeatable: bool = False,
    serve_only: bool = False,
    default_text: str | None = None,
    live: bool = False,
) -> Any:
    """A settings field: ``default`` as a user would write it, parsed once here.

    ``serve_only``: the option means something to the long-running server only (an interval,
    the listener), so `once` does not offer its flag. ``default_text`` replaces the default
    in ``--help`` where the value would not say what happens (None: "in memory only").
    ``live``: a SIGHUP applies a new value without a restart (the reload table, docs/reloading.md).
    """
    declared = _Declared(parse, default, help, flag, metavar, repeatable, serve_only, default_text, live)
    return dataclasses.field(default=parse(default), metadata={"option": declared})


def section(cls: type[S], *, serve_only: bool = False) -> Any:
    """A settings field holding the options of one package (the YAML mapping of that name);
    ``serve_only`` marks every option in it."""
    return dataclasses.field(default_factory=cls, metadata={"section": cls, "serve_only": serve_only})


@dataclass(frozen=True)
class Option:
    """One option of the merged table, under its dotted YAML key."""

    key: str
    parse: Parse
    default: Any
    help: str
    flag: str | None = None
    metavar: str | None = None
    repeatable: bool = False  # the flag may be given several times (a list)
    serve_only: bool = False  # no flag on `once`: only the server uses it
    default_text: str | None = None
    live: bool = False  # a SIGHUP applies it without a restart

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.key.replace("_", "-")

    @property
    def switch(self) -> bool:
        """An on/off option: one `--X` / `--no-X` flag (tri-state ones are auto without either)."""
        return self.parse in (parse_bool, auto_bool)

    @property
    def value_name(self) -> str:
        """The flag's metavar: declared, else the choices (`logfmt|json`), else VALUE."""
        choices = getattr(self.parse, "choices", None)
        return self.metavar or ("|".join(choices) if choices else "VALUE")

    @property
    def shown_default(self) -> str | None:
        """The default as ``--help`` shows it; None when there is nothing to show."""
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default == ():
            return None
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, (tuple, list)):
            return ",".join(str(item) for item in self.default)
        return str(self.default)

    @property
    def env_name(self) -> str:
        return env_form(self.key)


def options_of(cls: type, prefix: str = "", *, serve_only: bool = False) -> tuple[Option, ...]:
    """Every option of a settings class and its sections, in declaration order (``serve_only``:
    every one of them)."""
    return tuple(_walk(cls, prefix, serve_only))


def _walk(cls: type, prefix: str, serve_only: bool = False) -> Iterator[Option]:
    for f in dataclasses.fields(cls):
        if "option" in f.metadata:
            d: _Declared = f.metadata["option"]
            yield Option(
                prefix + f.name,
                d.parse,
                d.default,
                d.help,
                d.flag,
                d.metavar,
                d.repeatable,
                serve_only or d.serve_only,
                d.default_text,
                d.live,
            )
        elif "section" in f.metadata:
            yield from _walk(f.metadata["section"], f"{prefix}{f.name}.", serve_only or f.metadata["serve_only"])


def live_fields(cls: type) -> tuple[str, ...]:
    """The fields of an options class a SIGHUP applies (``option(..., live=True)``)."""
    return tuple(f.name for f in dataclasses.fields(cls) if "option" in f.metadata and f.metadata["option"].live)


def build(cls: type[S], values: Mapping[str, Any], prefix: str = "") -> S:
    """An instance of ``cls`` from parsed values by dotted key (absent keys keep their default)."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cast("type[DataclassInstance]", cls)):
        if "section" in f.metadata:
            kwargs[f.name] = build(f.metadata["section"], values, f"{prefix}{f.name}.")
        elif "option" in f.metadata and prefix + f.name in values:
            kwargs[f.name] = values[prefix + f.name]
    return cls(**kwargs)


# --- reading them ------------------------------------------------------------------------------


def flatten(doc: Mapping[Any, Any], keys: Mapping[str, Option], prefix: str = "") -> dict[str, Any]:
    """Nested YAML mapping -> dotted keys. Option values that are mappings or lists stay whole."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and dotted not in keys:
            out.update(flatten(value, keys, dotted + "."))
        else:
            out[dotted] = value
    return out


def load_yaml(text: str, keys: Mapping[str, Option], origin: str = "config") -> dict[str, Any]:
    """A config file's text -> dotted keys; problems are ConfigError naming the file."""
    try:
        doc = parse_yaml(text, origin)
    except ReasonError as exc:
        raise ConfigError([exc.message]) from None
    return _document(doc, keys, origin)


def read_config(path: str, keys: Mapping[str, Option]) -> dict[str, Any]:
    """A config file -> dotted keys: a bounded, regular, UTF-8 file (exporter.core.yamlfile);
    every refusal is a ConfigError naming the file."""
    try:
        doc = read_yaml(path)
    except ReasonError as exc:
        raise ConfigError([exc.message]) from None
    return _document(doc, keys, path)


def _document(doc: Any, keys: Mapping[str, Option], origin: str) -> dict[str, Any]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError([f"{origin}: the top level must be a mapping of keys"])
    return flatten(doc, keys)


# Names operators bring from Prometheus' own exporters (key form) -> the key that does that here,
# so `web.listen-address` and its typos are pointed at `listen` rather than left unexplained.
FAMILIAR_KEYS = {"web.listen_address": "listen", "web.listen-address": "listen"}


def env_form(key: str) -> str:
    """The `CANN_EXPORTER_*` variable of a dotted key."""
    return ENV_PREFIX + re.sub(r"[.\-]", "_", key).upper()


def did_you_mean(name: str, known: Iterable[str], prefix: str = "", familiar: Mapping[str, str] | None = None) -> str:
    """`; did you mean X?` for the closest known name, or nothing. A ``prefix`` every name
    shares is left out of the comparison, or it would make any two names look alike.
    ``familiar`` maps names from other exporters to ours: a match there suggests ours."""
    by_rest = {k.removeprefix(prefix): k for k in known}
    by_rest.update({k.removeprefix(prefix): ours for k, ours in (familiar or {}).items()})
    close = difflib.get_close_matches(name.removeprefix(prefix), list(by_rest), n=1, cutoff=0.6)
    return f"; did you mean {by_rest[close[0]]!r}?" if close else ""


def unknown_env(env: Mapping[str, str], table: tuple[Option, ...], others: Collection[str] = ()) -> list[str]:
    """Problems for every `CANN_EXPORTER_*` variable that names no option (a typo would
    otherwise be ignored in silence); ``others`` are variables read elsewhere (the hooks)."""
    known = {o.env_name for o in table} | set(others)
    familiar = {env_form(theirs): env_form(ours) for theirs, ours in FAMILIAR_KEYS.items()}
    return [
        f"{name}: unknown environment variable{did_you_mean(name, known, ENV_PREFIX, familiar)}"
        for name in sorted(env)
        if name.startswith(ENV_PREFIX) and name not in known
    ]


def resolve(
    table: tuple[Option, ...],
    file_values: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    origin: str = "config",
    other_env: Collection[str] = (),
) -> tuple[dict[str, Any], list[str]]:
    """Parsed values by key (defaults < file < environment < flags) and every problem found;
    ``other_env`` are `CANN_EXPORTER_*` variables that are not options but are allowed."""
    by_key = {o.key: o for o in table}
    problems: list[str] = []
    raw: dict[str, tuple[Any, str]] = {o.key: (o.default, "default") for o in table}
    for key, value in (file_values or {}).items():
        if key not in by_key:
            problems.append(f"{origin}: unknown key {key!r}{did_you_mean(key, by_key, familiar=FAMILIAR_KEYS)}")
        else:
            raw[key] = (value, f"{origin}: {key}")
    env = env or {}
    problems += unknown_env(env, table, other_env)
    for option in table:
        if option.env_name in env:
            raw[option.key] = (env[option.env_name], option.env_name)
    for key, value in (flags or {}).items():
        if value is not None:
            raw[key] = (value, by_key[key].flag_name)
    values: dict[str, Any] = {}
    for key, (value, where) in raw.items():
        try:
            _check_text(value)
            values[key] = by_key[key].parse(value)
        except (ValueError, TypeError, OverflowError) as exc:
            problems.append(f"{where}: {exc}")
    return values, problems


def _check_text(value: Any) -> None:
    """Refuse what no path or name holds and every system call would refuse later: a NUL
    character, or a lone surrogate (a YAML "\\ud800" escape) that UTF-8 cannot encode."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_text(item)
    elif isinstance(value, str):
        if "\0" in value:
            raise ValueError("contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("contains a lone surrogate, not text") from None
