"""One reading of JSON that came from outside (a Prometheus answer, a saved baseline).

``json.loads`` alone lets three things escape as the wrong exception: nesting deeper than the
recursion limit (RecursionError), an integer of more than 4,300 digits (a bare ValueError from
``int()``) and, once loaded, documents nested deep enough that any later recursive walk or
``repr`` fails. :func:`parse_json` turns all of them into one :class:`JsonRefused` and refuses
documents nested more than :data:`MAX_DEPTH` levels (no answer we read has more than 8).
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any

from exporter.core.errors import ReasonError

MAX_DEPTH = 64
MAX_INT_DIGITS = 32
# Without a run of more digits than that anywhere, no integer can be too long: the hook that
# checks each integer (a Python call per number, a third of a Prometheus answer's reading) is
# skipped. Found as a run of zeros once every digit is one (C speed; a regex takes 8x as long).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"0" * 9)
_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)
_SCALARS = frozenset({str, int, float, bool, type(None)})


class JsonRefused(ReasonError):
    """Not JSON we read: ``reason`` is ``bad_json``, ``too_deep`` or ``bad_number``."""


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JsonRefused("bad_number", f"a {len(text)}-digit integer")
    return int(text)


def parse_json(data: str | bytes, origin: str) -> Any:
    """The document; JsonRefused naming ``origin`` when it is not (bounded) JSON."""
    try:
        text = data.decode(json.detect_encoding(data), "surrogatepass") if isinstance(data, bytes) else data  # as json.loads does
        doc = json.loads(text, parse_int=_bounded_int) if _long_digit_run(text) else json.loads(text)
    except JsonRefused as exc:
        raise JsonRefused(exc.reason, f"{origin}: refused: {exc.message}") from None
    except RecursionError:
        raise JsonRefused("too_deep", f"{origin}: refused: JSON nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError as exc:
        raise JsonRefused("bad_json", f"{origin}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JsonRefused("bad_json", f"{origin}: not valid JSON ({exc})") from None
    if _depth_over(doc, MAX_DEPTH):
        raise JsonRefused("too_deep", f"{origin}: refused: JSON nested more than {MAX_DEPTH} levels deep")
    return doc


def _long_digit_run(text: str) -> bool:
    return _LONG_RUN in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZERO)


def _depth_over(doc: Any, limit: int) -> bool:
    """True when ``doc`` nests more than ``limit`` lists or objects (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth > limit:
            return True
        kinds = set(map(type, value))
        if kinds <= _SCALARS:
            continue
        if kinds == {list} and depth < limit and set(map(type, chain.from_iterable(value))) <= _SCALARS:
            continue  # lists of scalars one level down (a series' points): no deeper, counted without a walk
        stack.extend((item, depth + 1) for item in value if isinstance(item, (dict, list)))
    return False
