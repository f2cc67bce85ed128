"""The health-threshold table (thresholds.yaml beside this file): load, validate, judge.

Alert rules, dashboards and the `diagnose`/`profile` verdicts all read this one table:
``indicators`` (the health table: docs/tuning.md, 'The health table'), ``alerts`` (the contract alerts, each with
its threshold, windows and severity, taken from an indicator unless set) and the
``alerting``/``recording`` settings of the generated rules.
:func:`parse_thresholds` is pure and lists every bad entry at once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from exporter.core.errors import ProblemsError, ReasonError
from exporter.core.values import parse_duration, shown
from exporter.core.yamlfile import read_yaml

DEFAULT_PATH = Path(__file__).with_name("thresholds.yaml")
HEALTHY, WARNING, ABNORMAL = "healthy", "warning", "abnormal"
VERDICTS = (HEALTHY, WARNING, ABNORMAL)
DIRECTIONS = ("lower_is_better", "higher_is_better")
SEVERITIES = ("info", "warning", "critical")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_ALERT = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"[^"\\]*"\s*'
_SELECTOR = re.compile(rf"^(?:{_MATCHER}(?:,{_MATCHER})*)?$")


def selector_problem(text: str) -> str | None:
    """Why ``text`` is not a list of PromQL label matchers (``job="npu", env=~"prod.*"``), or None."""
    if _SELECTOR.match(text):
        return None
    return f'expected PromQL label matchers such as job="npu" (without braces), or nothing, got {text!r}'


def duration_seconds(text: str) -> float:
    """Seconds of a window as PromQL reads it (``90s``, ``10m``, ``1h30m``, ``0m``); ValueError otherwise."""
    return parse_duration(text, promql=True, allow_zero=True)


def _is_window(value: Any) -> bool:
    try:
        duration_seconds(value)
    except ValueError:
        return False
    return True


class ThresholdError(ProblemsError):
    """The table is invalid; ``problems`` lists every bad entry."""


class GenerateError(Exception):
    """The table is valid but asks for something a rule, a panel or a check cannot be made of
    (an alert's params out of what its expression takes)."""


@dataclass(frozen=True)
class Indicator:
    id: str
    title: str
    description: str
    direction: str  # lower_is_better | higher_is_better
    healthy: float | None  # bound of the healthy range (exclusive)
    abnormal: float | None  # bound of the abnormal range (exclusive)
    window: str  # Prometheus duration, e.g. 10m
    severity: str
    metrics: tuple[str, ...] = ()
    alert: str | None = None
    note: str | None = None
    ceiling: float | None = None  # higher_is_better: values above it are suspect, not better (a note)
    causes: tuple[str, ...] = ()
    levers: tuple[str, ...] = ()
    source: str = ""

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower_is_better"

    def verdict(self, value: float) -> str:
        """healthy / warning / abnormal; the table's bounds are strict (`< 15%`, `> 30%`)."""
        if self.abnormal is not None and self._worse(value, self.abnormal):
            return ABNORMAL
        if self.healthy is None or self._worse(self.healthy, value):
            return HEALTHY
        return WARNING

    def _worse(self, a: float, b: float) -> bool:
        return a > b if self.lower_is_better else a < b

    def healthy_text(self, scale: float = 100.0, unit: str = "%") -> str:
        """`< 15%`-style text of the healthy range (`≤ 70%` when only abnormal is known)."""
        if self.healthy is not None:
            return f"{'<' if self.lower_is_better else '>'} {num(self.healthy * scale)}{unit}"
        if self.abnormal is not None:
            return f"{'≤' if self.lower_is_better else '≥'} {num(self.abnormal * scale)}{unit}"
        return ""

    def abnormal_text(self, scale: float = 100.0, unit: str = "%") -> str:
        if self.abnormal is None:
            return ""
        return f"{'>' if self.lower_is_better else '<'} {num(self.abnormal * scale)}{unit}"


def num(value: float) -> str:
    """A threshold as PromQL, panels and verdicts print it: 0.6, 85, 600."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class AlertSpec:
    """One contract alert, resolved: values not set in its entry come from its indicator."""

    alert: str  # contract name (docs/runbooks.md), e.g. NPULowUtilization
    severity: str
    window: str  # alert `for:` ("0m": fires at once)
    threshold: float | None = None  # in the unit of the alert's metric
    range: str | None = None  # range of avg_over_time / rate in the expression
    indicator: str | None = None  # id of the health-table row it derives from
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)

    @property
    def bound(self) -> float:
        """The threshold of an alert whose expression compares with one."""
        if self.threshold is None:
            raise GenerateError(f"alert {self.alert}: needs a threshold (set one, or an indicator with a bound)")
        return self.threshold

    @property
    def span(self) -> str:
        """The range of an alert whose expression rates or counts over one."""
        if self.range is None:
            raise GenerateError(f"alert {self.alert}: needs a range")
        return self.range


@dataclass(frozen=True)
class AlertingSettings:
    runbook_url: str = "docs/runbooks.md"
    exporter_selector: str = ""
    profile_max_age: str = "1d"
    handover: str = "2m30s"  # keep_firing_for of every alert but CANNExporterDown
    outage: str = "15m"  # a firing alert holds while its target is down, this long after its last scrape ("0s": never)


@dataclass(frozen=True)
class RecordingSettings:
    quantiles: tuple[float, ...] = (0.1, 0.5, 0.9)
    rollup_interval: str = "1m"


@dataclass(frozen=True)
class Thresholds:
    version: int
    indicators: tuple[Indicator, ...]
    alerts: tuple[AlertSpec, ...] = ()
    alerting: AlertingSettings = AlertingSettings()
    recording: RecordingSettings = RecordingSettings()

    def alert(self, name: str) -> AlertSpec:
        spec = self.find(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def find(self, name: str) -> AlertSpec | None:
        """The alert ``name``, or None when the table has none (a table may leave alerts out)."""
        return next((spec for spec in self.alerts if spec.alert == name), None)

    def __getitem__(self, indicator_id: str) -> Indicator:
        for indicator in self.indicators:
            if indicator.id == indicator_id:
                return indicator
        raise KeyError(indicator_id)

    def __contains__(self, indicator_id: object) -> bool:
        return any(i.id == indicator_id for i in self.indicators)

    def verdict(self, indicator_id: str, value: float) -> str:
        return self[indicator_id].verdict(value)

    def for_metric(self, metric: str) -> tuple[Indicator, ...]:
        """Indicators whose bounds apply to ``metric`` (for rules and dashboard thresholds)."""
        return tuple(i for i in self.indicators if metric in i.metrics)


def parse_thresholds(data: Any, origin: str = "thresholds") -> Thresholds:
    """Validate the YAML data; raise ThresholdError naming every problem."""
    if not isinstance(data, Mapping):
        raise ThresholdError([f"{origin}: expected a mapping with 'version' and 'indicators'"])
    problems: list[str] = []
    version = data.get("version")
    if version != 1:
        problems.append(f"{origin}: version: expected 1, got {shown(version)}")
    entries = data.get("indicators")
    if not isinstance(entries, list) or not entries:
        raise ThresholdError(problems + [f"{origin}: indicators: expected a non-empty list"])
    indicators = []
    for index, entry in enumerate(entries):
        where = f"{origin}: indicators[{index}]"
        indicator = _indicator(entry, where, problems)
        if indicator is not None:
            indicators.append(indicator)
    ids = [i.id for i in indicators]
    problems += [f"{origin}: duplicate indicator id {i!r}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    by_id = {i.id: i for i in indicators}
    alerts = []
    raw_alerts = data.get("alerts", [])
    if not isinstance(raw_alerts, list):
        problems.append(f"{origin}: alerts: expected a list")
        raw_alerts = []
    for index, entry in enumerate(raw_alerts):
        spec = _alert(entry, f"{origin}: alerts[{index}]", by_id, problems)
        if spec is not None:
            alerts.append(spec)
    names = [a.alert for a in alerts]
    problems += [f"{origin}: duplicate alert {n!r}" for n in sorted({n for n in names if names.count(n) > 1})]
    alerting = _alerting(data.get("alerting", {}), f"{origin}: alerting", problems)
    recording = _recording(data.get("recording", {}), f"{origin}: recording", problems)
    if problems:
        raise ThresholdError(problems)
    return Thresholds(1, tuple(indicators), tuple(alerts), alerting, recording)


def _alert(entry: Any, where: str, indicators: Mapping[str, Indicator], problems: list[str]) -> AlertSpec | None:
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected a mapping")
        return None
    start = len(problems)
    name, where = _named(entry, "alert", _ALERT, "a CamelCase alert name", where, problems)
    known = {"alert", "indicator", "threshold", "window", "range", "severity", "params"}
    problems += [f"{where}: unknown key {key!r}" for key in entry if key not in known]
    indicator = None
    if entry.get("indicator") is not None:
        indicator = indicators.get(entry["indicator"]) if isinstance(entry["indicator"], str) else None
        if indicator is None:
            problems.append(f"{where}: indicator: no indicator {shown(entry['indicator'])} in the table")
    threshold = _bound(entry, "threshold", where, problems) if "threshold" in entry else None
    if threshold is None and indicator is not None:
        threshold = indicator.abnormal if indicator.abnormal is not None else indicator.healthy
    window = entry.get("window", indicator.window if indicator else None)
    if not _is_window(window):
        problems.append(f"{where}: window: expected a duration like 10m, got {shown(window)}")
    range_ = entry.get("range")
    if range_ is not None and (not _is_window(range_) or duration_seconds(range_) == 0):
        problems.append(f"{where}: range: expected a duration like 5m, got {shown(range_)}")
    severity = entry.get("severity", indicator.severity if indicator else None)
    if severity not in SEVERITIES:
        problems.append(f"{where}: severity: expected one of {', '.join(SEVERITIES)}, got {shown(severity)}")
    params = entry.get("params", {}) or {}
    values: list[tuple[str, Any]] = []
    if not isinstance(params, Mapping):
        problems.append(f"{where}: params: expected a mapping")
    else:
        for key, value in params.items():
            if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
                values.append((str(key), tuple(value)))
            elif _is_window(value):
                values.append((str(key), value))
            elif _finite(value):
                values.append((str(key), float(value)))
            else:
                problems.append(f"{where}: params.{key}: expected a number, a duration or a list of texts, got {shown(value)}")
    if len(problems) > start:
        return None
    return AlertSpec(
        alert=str(name),
        severity=str(severity),
        window=str(window),
        threshold=threshold,
        range=range_,
        indicator=indicator.id if indicator else None,
        params=tuple(values),
    )


_ALERTING_WINDOWS = ("profile_max_age", "handover", "outage")


def _alerting(data: Any, where: str, problems: list[str]) -> AlertingSettings:
    default = AlertingSettings()
    if not isinstance(data, Mapping):
        problems.append(f"{where}: expected a mapping")
        return default
    problems += [f"{where}: unknown key {key!r}" for key in data if key not in ("runbook_url", "exporter_selector", *_ALERTING_WINDOWS)]
    values = {}
    if "runbook_url" in data:
        if not isinstance(data["runbook_url"], str) or not data["runbook_url"].strip():
            problems.append(f"{where}: runbook_url: expected text, got {data['runbook_url']!r}")
        else:
            values["runbook_url"] = data["runbook_url"].strip()
    if "exporter_selector" in data:
        selector = data["exporter_selector"]
        if selector is not None and (not isinstance(selector, str) or selector_problem(selector)):
            problems.append(f"{where}: exporter_selector: {selector_problem(str(selector))}")
        else:
            values["exporter_selector"] = (selector or "").strip()
    for key in _ALERTING_WINDOWS:
        if key in data:
            if not _is_window(data[key]):
                problems.append(f"{where}: {key}: expected a duration like 1d, got {data[key]!r}")
            else:
                values[key] = data[key]
    return AlertingSettings(**values)


def _recording(data: Any, where: str, problems: list[str]) -> RecordingSettings:
    default = RecordingSettings()
    if not isinstance(data, Mapping):
        problems.append(f"{where}: expected a mapping")
        return default
    problems += [f"{where}: unknown key {key!r}" for key in data if key not in ("quantiles", "rollup_interval")]
    values: dict[str, Any] = {}
    if "quantiles" in data:
        q = data["quantiles"]
        if not isinstance(q, list) or not q or not all(_finite(v) and 0 < v < 1 for v in q):
            problems.append(f"{where}: quantiles: expected a list of numbers between 0 and 1, got {shown(q)}")
        else:
            values["quantiles"] = tuple(float(v) for v in q)
    if "rollup_interval" in data:
        r = data["rollup_interval"]
        if not _is_window(r) or duration_seconds(r) == 0:
            problems.append(f"{where}: rollup_interval: expected a duration like 1m, got {shown(r)}")
        else:
            values["rollup_interval"] = r
    return RecordingSettings(**values)


def _indicator(entry: Any, where: str, problems: list[str]) -> Indicator | None:
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected a mapping")
        return None
    start = len(problems)
    ident, where = _named(entry, "id", _ID, "a snake_case name", where, problems)
    text = {
        key: _text(entry, key, where, problems, required=key in ("title", "description"))
        for key in ("title", "description", "alert", "note", "source")
    }
    direction = entry.get("direction")
    if direction not in DIRECTIONS:
        problems.append(f"{where}: direction: expected one of {', '.join(DIRECTIONS)}, got {shown(direction)}")
    healthy, abnormal = _bound(entry, "healthy", where, problems), _bound(entry, "abnormal", where, problems)
    if healthy is None and abnormal is None and "healthy" in entry and "abnormal" in entry:
        problems.append(f"{where}: at least one of healthy and abnormal must be set")
    if healthy is not None and abnormal is not None and direction in DIRECTIONS:
        if (direction == "lower_is_better") != (healthy < abnormal):
            problems.append(f"{where}: healthy {healthy} and abnormal {abnormal} are in the wrong order for {direction}")
    ceiling = _bound(entry, "ceiling", where, problems) if "ceiling" in entry else None
    if ceiling is not None and (direction != "higher_is_better" or (healthy is not None and ceiling <= healthy)):
        problems.append(f"{where}: ceiling {ceiling} needs direction higher_is_better and a value above healthy")
    window = entry.get("window")
    if not _is_window(window):
        problems.append(f"{where}: window: expected a duration like 10m, got {shown(window)}")
    severity = entry.get("severity")
    if severity not in SEVERITIES:
        problems.append(f"{where}: severity: expected one of {', '.join(SEVERITIES)}, got {shown(severity)}")
    lists = {key: _strings(entry, key, where, problems) for key in ("metrics", "causes", "levers")}
    if len(problems) > start:
        return None
    return Indicator(
        id=str(ident),
        title=text["title"] or "",
        description=text["description"] or "",
        direction=str(direction),
        healthy=healthy,
        abnormal=abnormal,
        window=str(window),
        severity=str(severity),
        alert=text["alert"],
        note=text["note"],
        source=text["source"] or "",
        ceiling=ceiling,
        **lists,
    )


def _named(entry: Mapping[str, Any], key: str, pattern: re.Pattern[str], what: str, where: str, problems: list[str]) -> tuple[Any, str]:
    """The entry's name (its ``key``) and ``where`` naming it; a problem when the name is not ``what``."""
    name = entry.get(key)
    if isinstance(name, str) and pattern.match(name):
        return name, f"{where} ({name})"
    problems.append(f"{where}: {key}: expected {what}, got {shown(name)}")
    return name, where


def _text(entry: Mapping[str, Any], key: str, where: str, problems: list[str], required: bool) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key}: expected text, got {shown(value)}")
        return None
    return value.strip()


def _bound(entry: Mapping[str, Any], key: str, where: str, problems: list[str]) -> float | None:
    if key not in entry:
        problems.append(f"{where}: {key}: missing (use null when the table sets no bound)")
        return None
    value = entry[key]
    if value is None:
        return None
    if not _finite(value):
        problems.append(f"{where}: {key}: expected a finite number or null, got {shown(value)}")
        return None
    return float(value)


def _finite(value: Any) -> bool:
    """A YAML int or float that is a finite float (the rules print it)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300 and math.isfinite(value)


def _strings(entry: Mapping[str, Any], key: str, where: str, problems: list[str]) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append(f"{where}: {key}: expected a list of texts")
        return ()
    return tuple(v.strip() for v in value)


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """The table from ``path`` (default: the packaged thresholds.yaml)."""
    if path is None:
        return _default()
    return _load(Path(path))


@lru_cache(maxsize=1)
def _default() -> Thresholds:
    return _load(DEFAULT_PATH)


def _load(path: Path) -> Thresholds:
    try:
        data = read_yaml(path)
    except ReasonError as exc:
        raise ThresholdError([exc.message]) from None
    return parse_thresholds(data, str(path))


def verdict(indicator_id: str, value: float, table: Thresholds | None = None) -> str:
    """ "healthy" | "warning" | "abnormal" for ``value`` of the indicator (default table)."""
    return (table or load_thresholds()).verdict(indicator_id, value)
