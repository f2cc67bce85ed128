"""A small client for the Prometheus HTTP API (instant and range queries).

Every request is bounded in time (in total, and by the command's deadline) and in size
(:data:`MAX_ANSWER_BYTES`; see httpclient.py); answers are read as bounded JSON (any depth is
refused cleanly). Every failure becomes a :class:`PrometheusError` whose message says what went
wrong in words (unreachable, too slow, too large, HTTP status, Prometheus' own error text).
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import urllib.parse
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from exporter.core import values
from exporter.core.jsontext import JsonRefused, parse_json
from exporter.diagnostics.httpclient import Answer, Deadline, HttpFailure, MiB, fetch

# A 30-day report on a large cluster answers tens of MiB; more is refused (narrow --selector,
# or a coarser --step) rather than parsed into gigabytes.
MAX_ANSWER_BYTES = 64 * MiB
IN_FLIGHT = 2  # requests of `ranges` at a time: one evaluated while the other is decoded
# VictoriaMetrics moves a range query of 50 points or more onto multiples of its step (for its
# response cache) unless asked not to: a 30d report's hourly points would then all fall before
# a history shorter than an hour, and every point would miss the steps the report asks for by
# instant queries. Prometheus ignores the argument.
UNALIGNED = {"nocache": "1"}


class PrometheusError(Exception):
    """A query could not be answered; the message is meant for the user."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]  # (unix time, value)


def parse_duration(text: str) -> float:
    """Seconds of a Prometheus duration such as ``30d``, ``1h30m``, ``90s``; ValueError otherwise."""
    return values.parse_duration(text.strip(), promql=True)


def promql_duration(seconds: float) -> str:
    """A duration PromQL accepts, in whole seconds (at least 1s)."""
    return f"{max(1, round(seconds))}s"


def parse_time(text: str) -> float:
    """Unix seconds from a number, ``now``, ``now-2d`` or an RFC 3339 time (UTC if no offset)."""
    text = text.strip()
    if text == "now":
        return time.time()
    if text.startswith("now-"):
        return time.time() - parse_duration(text[4:])
    try:
        return float(text)
    except ValueError:
        pass
    from datetime import datetime, timezone

    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected now, now-DURATION, unix seconds or an RFC 3339 time, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def parse_selector(text: str | None) -> str:
    """The matchers inside ``{...}`` (``{instance="a"}`` or ``instance="a"``), '' for none."""
    if not text:
        return ""
    inner = text.strip()
    if inner.startswith("{"):
        if not inner.endswith("}"):
            raise ValueError(f'expected a label selector like {{instance="node-1:9435"}}, got {text!r}')
        inner = inner[1:-1]
    inner = inner.strip().rstrip(",")
    if inner and not re.match(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"', inner):
        raise ValueError(f'expected a label selector like {{instance="node-1:9435"}}, got {text!r}')
    return inner


def selector(metric: str, matchers: str, *extra: str) -> str:
    """``metric{extra..., matchers}``."""
    inner = ", ".join(m for m in (*extra, matchers) if m)
    return f"{metric}{{{inner}}}" if inner else metric


@dataclass
class PrometheusClient:
    url: str
    timeout: float = 15.0  # each request, in total (httpclient.py)
    deadline: Deadline | None = None  # the command's, shared by its requests
    max_bytes: int = MAX_ANSWER_BYTES

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not re.match(r"^https?://", self.url):
            raise PrometheusError(f"--prometheus: expected an http(s):// URL, got {self.url!r}")

    def instant(self, query: str, at: float) -> list[Sample]:
        data = self._call("query", {"query": query, "time": f"{at:.3f}"})
        if data.get("resultType") == "scalar":
            value = _point(data.get("result"))[1]
            return [Sample({}, value)] if value is not None else []
        return [Sample(_labels(item), v) for item in _result(data, query) if (v := _point(item.get("value"))[1]) is not None]

    def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        """Points at ``start`` + k * ``step`` up to ``end``, on Prometheus and VictoriaMetrics alike."""
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": promql_duration(step), **UNALIGNED}
        data = self._call("query_range", params)
        out = []
        for item in _result(data, query):
            raw = item.get("values")
            points = _points(raw) if isinstance(raw, list) else ()
            if points:
                out.append(Series(_labels(item), points))
        return out

    @contextlib.contextmanager
    def ranges(self, queries: Sequence[str], start: float, end: float, step: float) -> Iterator[Iterator[list[Series]]]:
        """Each query's ``range`` answer, in order, with the next IN_FLIGHT queries sent ahead:
        Prometheus evaluates one while this process decodes another (a month of a fleet is as
        much decoding as evaluating). For queries that do not depend on each other's answers. A
        query is sent only as the answers before it are taken, so leaving early sends no more."""
        with ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="prometheus") as pool:
            rest = iter(queries)
            ahead = deque(pool.submit(self.range, query, start, end, step) for query in islice(rest, IN_FLIGHT))

            def answers() -> Iterator[list[Series]]:
                while ahead:
                    answer = ahead.popleft().result()
                    ahead.extend(pool.submit(self.range, query, start, end, step) for query in islice(rest, 1))
                    yield answer

            try:
                yield answers()
            finally:
                for future in ahead:
                    future.cancel()

    def _call(self, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
        params = {**params, "timeout": promql_duration(self.timeout)}
        body = urllib.parse.urlencode(params).encode()
        what = f"Prometheus at {self.url}"
        try:
            answer = fetch(
                f"{self.url}/api/v1/{endpoint}",
                method="POST",
                data=body,
                timeout=self.timeout,
                max_bytes=self.max_bytes,
                what=what,
                deadline=self.deadline,
                headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
            )
        except HttpFailure as exc:
            raise PrometheusError(str(exc)) from None
        if answer.status >= 400:
            raise PrometheusError(_http_error(what, answer, params.get("query", "")))
        return _payload(what, answer.body, params.get("query", ""))


def _http_error(what: str, answer: Answer, query: str) -> str:
    try:
        detail = parse_json(answer.body or b"{}", what)
    except JsonRefused:
        detail = {}
    error = detail.get("error") if isinstance(detail, dict) else None
    if isinstance(error, str) and error:
        kind = detail.get("errorType")
        return f"{what} rejected the query ({kind if isinstance(kind, str) else answer.status}: {error}); query: {query}"
    if answer.status == 404:
        return f"{what}: {answer.status} Not Found for /api/v1 (is this the Prometheus base URL?)"
    return f"{what} answered HTTP {answer.status} {answer.reason}"


def _payload(what: str, raw: bytes, query: str) -> dict[str, Any]:
    try:
        doc = parse_json(raw, what)
    except JsonRefused as exc:
        if exc.reason == "bad_json":
            raise PrometheusError(f"{what} did not answer with Prometheus API JSON (is this the Prometheus base URL?)") from None
        raise PrometheusError(exc.message) from None
    data = doc.get("data") if isinstance(doc, dict) and doc.get("status") == "success" else None
    if not isinstance(data, dict):
        error = doc.get("error") if isinstance(doc, dict) else None
        error = error if isinstance(error, str) and error else "unexpected answer"
        raise PrometheusError(f"{what} returned an error: {error}; query: {query}")
    return data


def _result(data: dict[str, Any], query: str) -> list[dict[str, Any]]:
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"unexpected Prometheus answer (no result list) for {query}")
    return [item for item in result if isinstance(item, dict)]


def _labels(item: dict[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): v for k, v in metric.items() if isinstance(v, str)} if isinstance(metric, dict) else {}


def _points(raw: list[Any]) -> tuple[tuple[float, float], ...]:
    """A series' ``values``: the finite points, in order. A month of hourly points per chip is
    most of what `report` reads, so the common answer (every point a pair of numbers, every
    value finite) is converted in one pass; anything else goes point by point."""
    if set(map(type, raw)) <= {list}:
        try:
            points = [(float(t), float(v)) for t, v in raw if type(t) is not bool and type(v) is not bool]
        except (TypeError, ValueError, OverflowError):
            pass
        else:
            if math.isfinite(sum(chain.from_iterable(points))):  # a NaN or an infinity (or an overflow): point by point
                return tuple(points)
    pairs = (_point(p) for p in raw)
    return tuple((t, v) for t, v in pairs if t is not None and v is not None)


def _point(raw: Any) -> tuple[float | None, float | None]:
    """``[unix time, "value"]`` as Prometheus writes it; (None, None) for anything else."""
    if not isinstance(raw, list) or len(raw) != 2:
        return None, None
    return _number(raw[0]), _number(raw[1])


def _number(raw: Any) -> float | None:
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None
