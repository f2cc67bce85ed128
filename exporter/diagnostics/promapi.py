"""A small client for the Prometheus HTTP API (instant and range queries), standard library only.

Every request has a timeout; every failure becomes a :class:`PrometheusError` whose message
says what went wrong in words (unreachable, HTTP status, Prometheus' own error text).
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporter.core import values


class PrometheusError(Exception):
    """A query could not be answered; the message is meant for the user."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]    # (unix time, value)


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
            raise ValueError(f"expected a label selector like {{instance=\"node-1:9435\"}}, got {text!r}")
        inner = inner[1:-1]
    inner = inner.strip().rstrip(",")
    if inner and not re.match(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"', inner):
        raise ValueError(f"expected a label selector like {{instance=\"node-1:9435\"}}, got {text!r}")
    return inner


def selector(metric: str, matchers: str, *extra: str) -> str:
    """``metric{extra..., matchers}``."""
    inner = ", ".join(m for m in (*extra, matchers) if m)
    return f"{metric}{{{inner}}}" if inner else metric


@dataclass
class PrometheusClient:
    url: str
    timeout: float = 15.0
    opener: Callable[..., Any] = urllib.request.urlopen

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not re.match(r"^https?://", self.url):
            raise PrometheusError(f"--prometheus: expected an http(s):// URL, got {self.url!r}")

    def instant(self, query: str, at: float) -> list[Sample]:
        data = self._call("query", {"query": query, "time": f"{at:.3f}"})
        if data.get("resultType") == "scalar":
            value = _number(data.get("result", [0, "NaN"])[1])
            return [Sample({}, value)] if value is not None else []
        return [Sample(_labels(item), v) for item in _result(data, query)
                if (v := _number(item.get("value", [0, "NaN"])[1])) is not None]

    def range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        data = self._call("query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                          "step": promql_duration(step)})
        out = []
        for item in _result(data, query):
            points = tuple((float(t), v) for t, raw in item.get("values", []) if (v := _number(raw)) is not None)
            if points:
                out.append(Series(_labels(item), points))
        return out

    def _call(self, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
        params = {**params, "timeout": promql_duration(self.timeout)}
        body = urllib.parse.urlencode(params).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/{endpoint}", data=body, method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded",
                                                  "Accept": "application/json"})
        what = f"Prometheus at {self.url}"
        try:
            with self.opener(request, timeout=self.timeout) as response:
                raw = response.read(256 << 20)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(_http_error(what, exc, params.get("query", ""))) from None
        except urllib.error.URLError as exc:
            reason = exc.reason.strerror if isinstance(exc.reason, OSError) and exc.reason.strerror else exc.reason
            raise PrometheusError(f"cannot reach {what}: {reason}") from None
        except TimeoutError:
            raise PrometheusError(f"{what} did not answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise PrometheusError(f"cannot reach {what}: {exc.strerror or exc}") from None
        return _payload(what, raw, params.get("query", ""))


def _http_error(what: str, exc: urllib.error.HTTPError, query: str) -> str:
    try:
        detail = json.loads(exc.read(1 << 20) or b"{}")
    except (ValueError, OSError):
        detail = {}
    if isinstance(detail, dict) and detail.get("error"):
        return f"{what} rejected the query ({detail.get('errorType', exc.code)}: {detail['error']}); query: {query}"
    if exc.code == 404:
        return f"{what}: {exc.code} Not Found for /api/v1 (is this the Prometheus base URL?)"
    return f"{what} answered HTTP {exc.code} {exc.reason}"


def _payload(what: str, raw: bytes, query: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except ValueError:
        raise PrometheusError(f"{what} did not answer with Prometheus API JSON (is this the Prometheus base URL?)") from None
    if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(doc.get("data"), dict):
        error = doc.get("error") if isinstance(doc, dict) else None
        raise PrometheusError(f"{what} returned an error: {error or 'unexpected answer'}; query: {query}")
    return doc["data"]


def _result(data: dict[str, Any], query: str) -> list[dict[str, Any]]:
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"unexpected Prometheus answer (no result list) for {query}")
    return [item for item in result if isinstance(item, dict)]


def _labels(item: dict[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}


def _number(raw: Any) -> float | None:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
