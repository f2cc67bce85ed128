"""JSON read without holding a giant file: a top-level array decoded item by item, and small
files loaded whole with errors that say whether the file was cut short."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, Protocol, TextIO

from exporter.profiles.formats.common import ProfileParseError

# --- JSON: streamed trace events -------------------------------------------------------------

WHITESPACE = " \t\r\n"


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> str: ...


def iter_json_array(handle: _Reader, name: str, chunk: int = 1 << 20, max_item: int = 16 << 20) -> Iterator[Any]:
    """Items of a top-level JSON array, decoded one at a time from ``chunk``-sized reads.

    Raises ProfileParseError("truncated") when the file ends inside the array (a cut
    file) and ("malformed") for anything that is not an array or not JSON.
    """
    decoder = json.JSONDecoder()
    buf, eof = handle.read(chunk), False
    pos = skip_chars(buf, 0, WHITESPACE)
    if pos >= len(buf):
        raise ProfileParseError("empty", f"{name}: empty file")
    if buf[pos] != "[":
        raise ProfileParseError("malformed", f"{name}: not a JSON array of trace events")
    pos += 1
    while True:
        pos = skip_chars(buf, pos, WHITESPACE + ",")
        if pos >= len(buf) or buf[pos] != "]":
            try:
                if pos >= len(buf):
                    raise ValueError("need more data")
                item, end = decoder.raw_decode(buf, pos)
            except RecursionError:
                raise ProfileParseError("malformed", f"{name}: JSON nested too deeply") from None
            except ValueError as exc:
                if eof:
                    if cut_short(buf, exc):
                        raise ProfileParseError("truncated", f"{name}: JSON ends inside the event list (file cut short?)") from None
                    raise ProfileParseError("malformed", f"{name}: unreadable JSON event: {exc}") from None
                if len(buf) - pos > max_item:
                    raise ProfileParseError("malformed", f"{name}: unreadable JSON event (or one over {max_item >> 20} MiB)") from None
                more = handle.read(chunk)
                eof = not more
                buf, pos = buf[pos:] + more, 0
                continue
            yield item
            pos = end
            if pos > chunk:  # drop consumed text so the buffer stays about one chunk
                buf, pos = buf[pos:], 0
            continue
        return


_EVENTS_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


def iter_trace_events(handle: TextIO, name: str, max_head: int, max_item: int) -> Iterator[Any]:
    """The events of a Chrome trace, streamed: a top-level array, or the `traceEvents` array of
    an object (Kineto writes a few small keys before it: at most ``max_head`` characters are
    read looking for it). Memory stays about one event, never the file."""
    head = handle.read(1)
    while head and head in WHITESPACE:
        head = handle.read(1)
    if head != "{":
        yield from iter_json_array(Prefixed(head, handle), name, max_item=max_item)
        return
    text, seen = head, 1
    while not (match := _EVENTS_KEY.search(text)):
        more = handle.read(1 << 16)
        seen += len(more)
        if not more or seen > max_head:
            raise ProfileParseError("malformed", f"{name}: no traceEvents list")
        text = text[-64:] + more   # the key may straddle two reads
    yield from iter_json_array(Prefixed(text[match.end() - 1:], handle), name, max_item=max_item)


def event_span(event: dict[str, Any]) -> tuple[float, float] | None:
    """Start and duration (µs) of a complete ("X") trace event; None when either is missing,
    not a number, not finite, or the duration is negative."""
    try:
        start, duration = float(event["ts"]), float(event.get("dur", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(start) and math.isfinite(duration) and duration >= 0.0):
        return None
    return start, duration


def cut_short(text: str, exc: ValueError) -> bool:
    """A decode error at the very end (or an unclosed string) means the file was cut."""
    if not isinstance(exc, json.JSONDecodeError):
        return True  # ran out of data before an item started
    return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")


def skip_chars(text: str, pos: int, chars: str) -> int:
    end = len(text)
    while pos < end and text[pos] in chars:
        pos += 1
    return pos


class Prefixed:
    """A handle with one already-read character put back in front."""

    def __init__(self, prefix: str, handle: TextIO) -> None:
        self.prefix, self.handle = prefix, handle

    def read(self, size: int = -1) -> str:
        text, self.prefix = self.prefix + self.handle.read(size), ""
        return text


def loads(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ProfileParseError("malformed", f"{name}: JSON nested too deeply") from None
    except ValueError as exc:
        reason = "truncated" if cut_short(text, exc) else "malformed"
        detail = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ProfileParseError(reason, f"{name}: not valid JSON ({detail})") from None


