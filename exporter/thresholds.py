"""The health-threshold table (thresholds.yaml beside this file): load, validate, judge.

Alert rules, dashboards and the `diagnose`/`profile` verdicts all read this one table.
:func:`parse_thresholds` is pure and lists every bad entry at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PATH = Path(__file__).with_name("thresholds.yaml")
HEALTHY, WARNING, ABNORMAL = "healthy", "warning", "abnormal"
VERDICTS = (HEALTHY, WARNING, ABNORMAL)
DIRECTIONS = ("lower_is_better", "higher_is_better")
SEVERITIES = ("info", "warning", "critical")
_WINDOW = re.compile(r"^\d+(ms|s|m|h|d)$")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class ThresholdError(Exception):
    """The table is invalid; ``problems`` lists every bad entry."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Indicator:
    id: str
    title: str
    description: str
    direction: str                   # lower_is_better | higher_is_better
    healthy: float | None            # bound of the healthy range (exclusive)
    abnormal: float | None           # bound of the abnormal range (exclusive)
    window: str                      # Prometheus duration, e.g. 10m
    severity: str
    metrics: tuple[str, ...] = ()
    alert: str | None = None
    note: str | None = None
    causes: tuple[str, ...] = ()
    levers: tuple[str, ...] = ()
    source: str = ""

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower_is_better"

    def verdict(self, value: float) -> str:
        """healthy / warning / abnormal; the guide's bounds are strict (`< 15%`, `> 30%`)."""
        worse = (lambda a, b: a > b) if self.lower_is_better else (lambda a, b: a < b)
        if self.abnormal is not None and worse(value, self.abnormal):
            return ABNORMAL
        if self.healthy is None or worse(self.healthy, value):
            return HEALTHY
        return WARNING

    def healthy_text(self, scale: float = 100.0, unit: str = "%") -> str:
        """`< 15%`-style text of the healthy range (`≤ 70%` when only abnormal is known)."""
        if self.healthy is not None:
            return f"{'<' if self.lower_is_better else '>'} {_num(self.healthy * scale)}{unit}"
        if self.abnormal is not None:
            return f"{'≤' if self.lower_is_better else '≥'} {_num(self.abnormal * scale)}{unit}"
        return ""

    def abnormal_text(self, scale: float = 100.0, unit: str = "%") -> str:
        if self.abnormal is None:
            return ""
        return f"{'>' if self.lower_is_better else '<'} {_num(self.abnormal * scale)}{unit}"


def _num(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Thresholds:
    version: int
    indicators: tuple[Indicator, ...]

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
        problems.append(f"{origin}: version: expected 1, got {version!r}")
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
    if problems:
        raise ThresholdError(problems)
    return Thresholds(1, tuple(indicators))


def _indicator(entry: Any, where: str, problems: list[str]) -> Indicator | None:
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected a mapping")
        return None
    start = len(problems)
    ident = entry.get("id")
    if not isinstance(ident, str) or not _ID.match(ident):
        problems.append(f"{where}: id: expected a snake_case name, got {ident!r}")
    else:
        where = f"{where} ({ident})"
    text = {key: _text(entry, key, where, problems, required=key in ("title", "description")) for key in ("title", "description", "alert", "note", "source")}
    direction = entry.get("direction")
    if direction not in DIRECTIONS:
        problems.append(f"{where}: direction: expected one of {', '.join(DIRECTIONS)}, got {direction!r}")
    healthy, abnormal = _bound(entry, "healthy", where, problems), _bound(entry, "abnormal", where, problems)
    if healthy is None and abnormal is None and "healthy" in entry and "abnormal" in entry:
        problems.append(f"{where}: at least one of healthy and abnormal must be set")
    if healthy is not None and abnormal is not None and direction in DIRECTIONS:
        if (direction == "lower_is_better") != (healthy < abnormal):
            problems.append(f"{where}: healthy {healthy} and abnormal {abnormal} are in the wrong order for {direction}")
    window = entry.get("window")
    if not isinstance(window, str) or not _WINDOW.match(window):
        problems.append(f"{where}: window: expected a duration like 10m, got {window!r}")
    severity = entry.get("severity")
    if severity not in SEVERITIES:
        problems.append(f"{where}: severity: expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    lists = {key: _strings(entry, key, where, problems) for key in ("metrics", "causes", "levers")}
    if len(problems) > start:
        return None
    return Indicator(
        id=str(ident), title=text["title"] or "", description=text["description"] or "", direction=str(direction),
        healthy=healthy, abnormal=abnormal, window=str(window), severity=str(severity), alert=text["alert"],
        note=text["note"], source=text["source"] or "", **lists,
    )


def _text(entry: Mapping[str, Any], key: str, where: str, problems: list[str], required: bool) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{where}: {key}: expected text, got {value!r}")
        return None
    return value.strip()


def _bound(entry: Mapping[str, Any], key: str, where: str, problems: list[str]) -> float | None:
    if key not in entry:
        problems.append(f"{where}: {key}: missing (use null when the guide gives no bound)")
        return None
    value = entry[key]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{where}: {key}: expected a number or null, got {value!r}")
        return None
    return float(value)


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
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ThresholdError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ThresholdError([f"{path}: not valid YAML: {exc}"]) from None
    return parse_thresholds(data, str(path))


def verdict(indicator_id: str, value: float, table: Thresholds | None = None) -> str:
    """"healthy" | "warning" | "abnormal" for ``value`` of the indicator (default table)."""
    return (table or load_thresholds()).verdict(indicator_id, value)
