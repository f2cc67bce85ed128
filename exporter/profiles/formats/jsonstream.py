"""JSON read by streaming, with caps on what is kept: whatever a file holds, memory is one read
block plus one item (a trace event, a communication op) of at most ``JsonCaps.item_bytes`` and
``item_values`` values, nested at most ``depth`` levels.

The tokens come from ijson's ``basic_parse`` (its C backend when installed): plain events, no
prefix strings (ijson's ``items``/``parse`` build one per nesting level, quadratic in depth).
Items are built here, counting as they go, and every read is checked: more than ``item_bytes``
read inside one item, or for one token between items, refuses the file before the text is
kept. Refusals are ProfileParseError with a reason for the self-metrics: ``item_too_large``,
``too_deep``, ``too_many_objects`` (values in a file), ``truncated``, ``malformed``, ``empty``.

Without ijson (the training-hook window summariser runs in the training process's Python,
standard library only) :func:`json_items` falls back to ``json`` on bounded blocks: a file is
then read whole only when it is at most ``FALLBACK_DOCUMENT_BYTES``, and top-level arrays item
by item, each item's text at most ``item_bytes``.
"""

from __future__ import annotations

import codecs
import importlib
import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from exporter.core.inputfile import MiB
from exporter.profiles.formats.budget import JSON_BUILT, JSON_ITEM, JSON_VALUE, JSON_WALK, UNIT_BYTES, Budget
from exporter.profiles.formats.common import Limits, ProfileParseError


def _optional(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


_ijson = _optional("ijson")

BLOCK = 64 * 1024  # bytes per read: the events of one block are what ijson holds
FALLBACK_DOCUMENT_BYTES = 2 * MiB  # without ijson, a document parsed whole (~25x this in objects at worst)

Path = tuple[str | None, ...]  # map keys leading to a value; None for an array member
# Called for each value met outside an item: True builds it (an item), False skips it,
# None descends into it (containers only). ``kind`` is "map", "array" or "scalar".
Select = Callable[[Path, str], bool | None]


@dataclass(frozen=True)
class JsonCaps:
    """What one JSON file may cost. Real trace events and communication ops are a few hundred
    bytes to a few KiB, a few dozen values, 3-5 levels deep."""

    item_bytes: int = 1 * MiB  # text of one item (and of any token between items)
    item_values: int = 100_000  # objects, arrays and scalars of one item
    depth: int = 64  # nesting levels, counted from the top of the file
    file_values: int | None = None  # values in the whole file (None: the caller counts items)
    budget: Budget | None = None  # the export's: charged the work of reading, and what the reader keeps


def json_caps(limits: Limits, file_values: int | None = None, item_bytes: int | None = None, budget: Budget | None = None) -> JsonCaps:
    """The caps ``limits`` sets for one file; ``item_bytes`` for a small file built whole."""
    return JsonCaps(item_bytes or limits.max_json_event_bytes, limits.max_json_event_values, limits.max_json_depth, file_values, budget)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> str | bytes: ...


class _Guard:
    """The file as ijson reads it: bytes (text handles are encoded), a UTF-8 BOM dropped, and
    no read once more than ``cap`` bytes have gone by since ``mark``."""

    def __init__(self, handle: Readable, cap: int, name: str, counter: _Counter) -> None:
        self.handle, self.cap, self.name, self.counter = handle, cap, name, counter
        self.total = self.mark = 0
        self.eof = self.started = False
        self.blank = True  # nothing but whitespace read so far

    def read(self, size: int = BLOCK) -> bytes:
        if size == 0:  # ijson asks for nothing first, to see whether the file gives bytes
            return b""
        if self.total - self.mark > self.cap:
            raise ProfileParseError("item_too_large", f"{self.name}: one JSON item over {self.cap} bytes")
        data = self.handle.read(size)
        block = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        if not self.started:
            self.started = True
            block = block.removeprefix(b"\xef\xbb\xbf")
        self.total += len(block)
        self.eof = not block
        if self.blank and block.strip():
            self.blank = False
        self.counter.charge(self.total)
        return block


class _Counter:
    """Values seen in the file, refused past ``limit``; items handed out. Their work and the
    bytes read are charged to the budget once per block read (:meth:`charge`)."""

    def __init__(self, caps: JsonCaps, name: str) -> None:
        self.limit, self.name, self.budget = caps.file_values, name, caps.budget
        self.seen = self.items = self.charged = 0
        self.walked = self.built = 0  # values met outside items (select asked), values built into items

    def add(self, count: int) -> None:
        self.seen += count
        if self.limit is not None and self.seen > self.limit:
            raise ProfileParseError("too_many_objects", f"{self.name}: more than {self.limit} JSON values")

    def charge(self, read: int) -> None:
        """The work done since the last charge, ``read`` bytes read so far."""
        if self.budget is not None:
            done = read // UNIT_BYTES + self.seen * JSON_VALUE + self.walked * JSON_WALK + self.built * JSON_BUILT
            done += self.items * JSON_ITEM
            self.budget.work(done - self.charged)
            self.charged = done


def json_items(handle: Readable, name: str, select: Select, caps: JsonCaps = JsonCaps()) -> Iterator[tuple[Path, Any]]:
    """The values ``select`` picks, with the path leading to each, streamed from ``handle``."""
    if _ijson is None:
        yield from _fallback_items(handle, name, select, caps)
        return
    counter = _Counter(caps, name)
    guard = _Guard(handle, caps.item_bytes, name, counter)
    try:
        yield from _walk(_ijson.basic_parse(guard, use_float=True, buf_size=BLOCK), guard, name, select, caps, counter)
        counter.charge(guard.total)
    except _ijson.JSONError as exc:
        if guard.blank:
            raise ProfileParseError("empty", f"{name}: empty file") from None
        raise _refusal(name, str(exc), cut=guard.eof) from None
    except ValueError as exc:  # a number Python will not convert (an integer of more than 4,300 digits)
        raise ProfileParseError("malformed", f"{name}: unreadable JSON number ({_first_line(str(exc))})") from None


def _walk(
    events: Iterator[tuple[str, Any]], guard: _Guard, name: str, select: Select, caps: JsonCaps, counter: _Counter
) -> Iterator[tuple[Path, Any]]:
    """Containers descended into are open: [path, is a map, pending key, choices by kind]; an
    array's members share one path, so ``select`` is asked once per kind there."""
    open_: list[list[Any]] = []
    for event, value in events:
        guard.mark = guard.total
        if event == "map_key":
            open_[-1][2] = value
            continue
        if event == "end_map" or event == "end_array":
            open_.pop()
            continue
        kind = "map" if event == "start_map" else "array" if event == "start_array" else "scalar"
        counter.add(1)
        counter.walked += 1
        if not open_:
            here: Path = ()
            choice = select(here, kind)
        else:
            parent = open_[-1]
            here = (*parent[0], parent[2] if parent[1] else None)
            if parent[1]:
                choice = select(here, kind)
            else:
                if kind not in parent[3]:
                    parent[3][kind] = select(here, kind)
                choice = parent[3][kind]
        if choice is None and kind != "scalar":
            if len(open_) >= caps.depth:
                raise _too_deep(name, caps)
            open_.append([here, kind == "map", None, {}])
        elif choice:
            counter.items += 1
            yield here, _build(event, value, events, len(open_), name, caps, counter)
        elif kind != "scalar":
            _skip(events, guard, len(open_), name, caps, counter)


_SCALARS = frozenset({"string", "number", "boolean", "null"})


def _build(first: str, scalar: Any, events: Iterator[tuple[str, Any]], depth: int, name: str, caps: JsonCaps, counter: _Counter) -> Any:
    """One item from its first event on; the guard's mark stays at its start, so its whole text
    is bounded, and its values and depth are counted as they are made."""
    if first == "start_map":
        root: Any = {}
    elif first == "start_array":
        root = []
    else:
        return scalar
    if depth + 1 > caps.depth:
        raise _too_deep(name, caps)
    top, is_list, key = root, first == "start_array", None
    outer: list[tuple[Any, bool, Any]] = []  # the containers around ``top``, with their pending key
    count, limit, deepest = 1, caps.item_values, caps.depth - depth - 1
    for event, value in events:
        if event == "map_key":
            key = value
        elif event in _SCALARS:
            count += 1
            if count > limit:
                raise _too_many_values(name, limit)
            if is_list:
                top.append(value)
            else:
                top[key] = value
        elif event == "start_map" or event == "start_array":
            count += 1
            if count > limit:
                raise _too_many_values(name, limit)
            child: Any = {} if event == "start_map" else []
            if is_list:
                top.append(child)
            else:
                top[key] = child
            if len(outer) >= deepest:
                raise _too_deep(name, caps)
            outer.append((top, is_list, key))
            top, is_list, key = child, event == "start_array", None
        elif outer:
            top, is_list, key = outer.pop()
        else:
            counter.add(count - 1)
            counter.built += count
            return root
    return root  # the events ended inside the item: ijson raises before this


def _too_many_values(name: str, limit: int) -> ProfileParseError:
    return ProfileParseError("item_too_large", f"{name}: one JSON item with more than {limit} values")


def _skip(events: Iterator[tuple[str, Any]], guard: _Guard, depth: int, name: str, caps: JsonCaps, counter: _Counter) -> None:
    """A container not wanted: its events consumed, counted and checked, nothing kept."""
    level = 1
    for event, _ in events:
        guard.mark = guard.total
        if event == "end_map" or event == "end_array":
            level -= 1
            if level == 0:
                return
        elif event != "map_key":
            counter.add(1)
            if event == "start_map" or event == "start_array":
                level += 1
                if depth + level > caps.depth:
                    raise _too_deep(name, caps)


def _too_deep(name: str, caps: JsonCaps) -> ProfileParseError:
    return ProfileParseError("too_deep", f"{name}: JSON nested more than {caps.depth} levels deep")


def _first_line(message: str) -> str:
    """ijson's message without the excerpt of the file it appends (bytes from outside)."""
    return message.splitlines()[0][:120] if message else "unreadable"


def _refusal(name: str, message: str, cut: bool) -> ProfileParseError:
    """An error met at the end of the data (or inside a string there) means the file was cut."""
    text = _first_line(message.removeprefix("b'"))
    if cut or "premature EOF" in text:
        return ProfileParseError("truncated", f"{name}: JSON ends inside a value (file cut short?)")
    return ProfileParseError("malformed", f"{name}: not valid JSON ({text})")


# --- the standard-library fallback ------------------------------------------------------------


def _fallback_items(handle: Readable, name: str, select: Select, caps: JsonCaps) -> Iterator[tuple[Path, Any]]:
    """Top-level arrays item by item (each item's text bounded); anything else parsed whole
    from at most FALLBACK_DOCUMENT_BYTES and walked with ``select``."""
    counter = _Counter(caps, name)
    reader = _TextBlocks(_Guard(handle, 2 * FALLBACK_DOCUMENT_BYTES, name, counter))
    text = reader.next()
    while text.isspace() and not reader.eof:
        text += reader.next()
    start = text.lstrip()
    if not start:
        raise ProfileParseError("empty", f"{name}: empty file")
    if start[0] == "[" and select((), "array") is None:
        yield from _array_items(start[1:], reader, name, caps, select, counter)
        return
    while not reader.eof and len(text) <= FALLBACK_DOCUMENT_BYTES:
        text += reader.next()
    if len(text) > FALLBACK_DOCUMENT_BYTES:
        raise ProfileParseError("too_large", f"{name}: over {FALLBACK_DOCUMENT_BYTES} bytes, read whole only with ijson installed")
    yield from _select(_loads(text, name), (), name, select, caps, 0)


class _TextBlocks:
    """Blocks of the guarded file as text (a character split between two blocks kept whole)."""

    def __init__(self, guard: _Guard) -> None:
        self.guard, self.decoder, self.eof = guard, codecs.getincrementaldecoder("utf-8")("replace"), False

    def next(self) -> str:
        self.guard.mark = self.guard.total
        block = self.guard.read(BLOCK)
        self.eof = not block
        return self.decoder.decode(block, final=self.eof)


def _array_items(
    text: str, reader: _TextBlocks, name: str, caps: JsonCaps, select: Select, counter: _Counter
) -> Iterator[tuple[Path, Any]]:
    decoder = json.JSONDecoder()
    pos = count = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos < len(text) and text[pos] == "]":
            return
        try:
            if pos >= len(text):
                raise ValueError("need more data")
            item, end = decoder.raw_decode(text, pos)
        except RecursionError:
            raise _too_deep(name, caps) from None
        except ValueError as exc:
            if reader.eof:
                raise _refusal(name, str(exc), cut=_at_end(text, exc)) from None
            if len(text) - pos > caps.item_bytes:
                raise ProfileParseError("item_too_large", f"{name}: one JSON item over {caps.item_bytes} bytes") from None
            text, pos = text[pos:] + reader.next(), 0
            continue
        count += 1
        counter.items += 1
        if caps.file_values is not None and count > caps.file_values:
            raise ProfileParseError("too_many_objects", f"{name}: more than {caps.file_values} JSON values")
        if select((None,), "map" if isinstance(item, dict) else "array" if isinstance(item, list) else "scalar"):
            yield (None,), item
        pos = end
        if pos > BLOCK:
            text, pos = text[pos:], 0


def _at_end(text: str, exc: ValueError) -> bool:
    """A decode error at the very end of the data (or an unclosed string) means it was cut."""
    if not isinstance(exc, json.JSONDecodeError):
        return True
    return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")


def _loads(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ProfileParseError("too_deep", f"{name}: JSON nested too deeply") from None
    except ValueError as exc:
        raise _refusal(name, str(exc), cut=_at_end(text, exc)) from None


def _select(value: Any, here: Path, name: str, select: Select, caps: JsonCaps, depth: int) -> Iterator[tuple[Path, Any]]:
    kind = "map" if isinstance(value, dict) else "array" if isinstance(value, list) else "scalar"
    choice = select(here, kind)
    if choice:
        yield here, value
    elif choice is None and kind != "scalar":
        if depth >= caps.depth:
            raise _too_deep(name, caps)
        members = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for key, member in members:
            yield from _select(member, (*here, key), name, select, caps, depth + 1)


# --- reading events -----------------------------------------------------------------------------


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


def trace_events(handle: Readable, name: str, caps: JsonCaps) -> Iterator[Any]:
    """The events of a Chrome trace: a top-level array, or the `traceEvents` array of an object
    (Kineto writes a few keys before it: skipped, counted and bounded like the rest)."""
    seen = {"top": "", "events": ""}

    def select(path: Path, kind: str) -> bool | None:
        if path == ():
            if kind == "scalar":
                raise ProfileParseError("malformed", f"{name}: not a JSON array of trace events")
            seen["top"] = kind
            return None
        if path == ("traceEvents",):
            seen["events"] = kind
            return None if kind == "array" else False
        return path == (None,) or path == ("traceEvents", None)

    for _, event in json_items(handle, name, select, caps):
        yield event
    if seen["top"] == "map" and seen["events"] != "array":
        raise ProfileParseError("malformed", f"{name}: no traceEvents list")


def load_document(handle: Readable, name: str, caps: JsonCaps) -> Any:
    """A small file's whole document, built under ``caps`` (its size bounded by the caller)."""
    for _, value in json_items(handle, name, lambda path, kind: True, caps):
        return value
    raise ProfileParseError("empty", f"{name}: empty file")


def as_handle(source: str | bytes | Readable) -> Readable:
    """Text or bytes already in memory read like a file."""
    if isinstance(source, str):
        return io.BytesIO(source.encode("utf-8", "surrogatepass"))
    if isinstance(source, bytes):
        return io.BytesIO(source)
    return source
