"""What a query on recorded series costs without the recording rules: each recorded series
replaced by its rule's expression, read from the raw series (a range over a recorded series
becomes a subquery at the rule's evaluation interval), so both answer the same question.
Also the order the rules can be backfilled in: a rule reads only raw series or rules of
earlier levels (`promtool tsdb create-blocks-from rules` evaluates every rule on the data
already in Prometheus, so a rule on another rule needs that rule's blocks loaded first).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from exporter.thresholds.table import duration_seconds

# A recorded series in a query: level:metric:operations, optional matchers, optional range.
_RECORDED = re.compile(r"(?<![\w:])([a-zA-Z_]\w*:[\w:]+)(\{[^}]*\})?(\s*\[([^\]]*)\])?(\s+offset\b)?")
_MATCHER = re.compile(r'\s*([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_MATCH_ALL = {".*"}  # a Grafana "All" selection: no constraint


@dataclasses.dataclass(frozen=True)
class Rule:
    record: str
    expr: str
    labels: tuple[tuple[str, str], ...]
    group: str
    interval: float  # seconds between the group's evaluations


def rules_of(doc: Mapping[str, Any], default_interval: float) -> list[Rule]:
    """The recording rules of a rule file (parsed YAML), each with its group's interval."""
    out = []
    for group in doc.get("groups", []):
        interval = duration_seconds(group["interval"]) if group.get("interval") else default_interval
        for rule in group.get("rules", []):
            if "record" in rule:
                out.append(
                    Rule(rule["record"], rule["expr"].strip(), tuple(sorted((rule.get("labels") or {}).items())), group["name"], interval)
                )
    return out


def recorded_names(expr: str) -> set[str]:
    return {m.group(1) for m in _RECORDED.finditer(expr)}


def levels(rules: Sequence[Rule]) -> list[list[Rule]]:
    """The rules in backfill passes: pass k holds the rules whose recorded inputs are all in
    earlier passes. ValueError on a cycle or a recorded input no rule writes."""
    by_name: dict[str, list[Rule]] = {}
    for rule in rules:
        by_name.setdefault(rule.record, []).append(rule)
    depth: dict[str, int] = {}

    def level(name: str, path: tuple[str, ...]) -> int:
        if name in depth:
            return depth[name]
        if name in path:
            raise ValueError(f"recording rules depend on each other in a cycle: {' -> '.join((*path, name))}")
        if name not in by_name:
            raise ValueError(f"{path[-1] if path else 'a rule'} reads {name}, which no rule records")
        inputs = set().union(*(recorded_names(r.expr) for r in by_name[name]))
        depth[name] = 1 + max((level(i, (*path, name)) for i in inputs), default=-1)
        return depth[name]

    passes: list[list[Rule]] = []
    for rule in rules:
        k = level(rule.record, ())
        passes.extend([] for _ in range(k + 1 - len(passes)))
        passes[k].append(rule)
    return passes


def rule_file(rules: Iterable[Rule], default_interval: float) -> dict[str, Any]:
    """A rule file holding ``rules`` in their groups (same names and intervals as shipped, so a
    group's evaluation times are the same in every pass)."""
    groups: dict[str, dict[str, Any]] = {}
    for rule in rules:
        group = groups.setdefault(rule.group, {"name": rule.group, "rules": []})
        if rule.interval != default_interval:
            group["interval"] = f"{rule.interval:g}s"
        entry: dict[str, Any] = {"record": rule.record, "expr": rule.expr}
        if rule.labels:
            entry["labels"] = dict(rule.labels)
        group["rules"].append(entry)
    return {"groups": list(groups.values())}


class RawEquivalents:
    """``expand(query)``: the query with every recorded series replaced by its rule's
    expression on raw series (recursively)."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: dict[str, list[Rule]] = {}
        for rule in rules:
            self.rules.setdefault(rule.record, []).append(rule)

    def expand(self, query: str) -> str:
        return _RECORDED.sub(self._replace, query)

    def _replace(self, match: re.Match[str]) -> str:
        name, matchers, window, offset = match.group(1), match.group(2) or "", match.group(4), match.group(5)
        if offset and window is None:
            raise ValueError(f"an offset on a recorded series has no raw equivalent here: {match.group(0)!r}")
        rule = self._rule(name, _matchers(matchers))
        inner = f"({self.expand(rule.expr)})"
        for label, value in rule.labels:  # the rule's own labels, as the recorded series has them
            inner = f'label_replace({inner}, "{label}", "{value}", "", "")'
        if window is None:
            return inner
        # a subquery takes the offset as the range did (its duration follows in the query)
        return f"({inner})[{window.strip()}:{rule.interval:g}s]{offset or ''}"

    def _rule(self, name: str, matchers: list[tuple[str, str, str]]) -> Rule:
        if name not in self.rules:
            raise ValueError(f"no recording rule writes {name}")
        candidates = []
        for rule in self.rules[name]:
            own = dict(rule.labels)
            rest = [m for m in matchers if m[0] not in own]
            if all(own[label] == value and op == "=" for label, op, value in matchers if label in own) and not rest:
                candidates.append(rule)
        if len(candidates) != 1:
            shown = ", ".join(f'{a}{op}"{b}"' for a, op, b in matchers)
            raise ValueError(f"{name}{{{shown}}} matches {len(candidates)} recording rules; expected one")
        return candidates[0]


def _matchers(text: str) -> list[tuple[str, str, str]]:
    """The matchers of ``{...}`` that constrain anything (`=~".*"` does not)."""
    inner = text.strip()[1:-1] if text else ""
    found, pos = [], 0
    while pos < len(inner.rstrip()):
        m = _MATCHER.match(inner, pos)
        if not m:
            raise ValueError(f"cannot read the matchers {text!r}")
        if not (m.group(2) == "=~" and m.group(3) in _MATCH_ALL):
            found.append((m.group(1), m.group(2), m.group(3)))
        pos = m.end()
    return found
