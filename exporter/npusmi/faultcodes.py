"""The fault-code table: which handling level each chip fault code gets.

The shipped table is Huawei's (faultcodes.json beside this file, Apache-2.0: faultcodes.NOTICE);
a site may name its own file of the same shape in ``npu_smi.fault_codes``, which replaces it
whole. The shape: one JSON object whose keys are a level name plus ``Codes``
(``SeparateNPUCodes``, ...) and whose values are lists of codes as hex strings (``80E3A201``;
``0x`` and lower case are accepted).

A table is bounded and unambiguous: at most :data:`MAX_BYTES` and :data:`MAX_CODES` codes; a
level named twice, or a code listed under two levels (in any spelling: ``0xabc`` and ``ABC`` are
one code), is refused naming it. A code listed twice under the same level says the same thing
twice and is accepted.

Read once at start and again on SIGHUP; :func:`load_fault_codes` lists every bad entry at once
(the first :data:`MAX_PROBLEMS`). A start with a bad table does not start; a SIGHUP keeps the
table in use.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.core import faultlevels
from exporter.core.errors import ProblemsError, ReasonError
from exporter.core.inputfile import MiB, read_text_input, shown_path
from exporter.core.jsontext import parse_json

SHIPPED = Path(__file__).with_name("faultcodes.json")
MAX_BYTES = 4 * MiB  # the shipped table is 35 KiB
MAX_CODE_DIGITS = 16  # codes have 8 or 9 hex digits
MAX_CODES = 20_000  # code entries in a table; the shipped one lists 803
MAX_PROBLEMS = 20  # problems listed, then a count of the rest
_HEX = frozenset(string.hexdigits)
_SUFFIX = "Codes"


class FaultCodeError(ProblemsError):
    """A fault-code table that cannot be used; ``problems`` names every bad entry."""


@dataclass(frozen=True)
class FaultCodeTable:
    levels: Mapping[str, str]  # normalised code -> level name
    origin: str  # the file it came from

    def level(self, code: str) -> str:
        """The handling level of ``code`` as npu-smi prints it (``80E3A201``, ``0x80E3A201``); ``unknown`` when unlisted."""
        return self.levels.get(normalise(code), faultlevels.UNKNOWN)


def normalise(code: str) -> str:
    """Upper-case hex without ``0x``, the table's spelling."""
    code = code.strip()
    if code[:2] in ("0x", "0X"):
        code = code[2:]
    return code.upper()


def parse_fault_codes(text: str, origin: str) -> FaultCodeTable:
    """A table from the text of its file; FaultCodeError naming each bad entry."""
    try:
        doc = parse_json(text, origin)
    except ReasonError as exc:
        raise FaultCodeError([exc.message]) from None
    if not isinstance(doc, dict):
        raise FaultCodeError([f"{origin}: must be a JSON object of <level>Codes lists"])
    problems = [f"{origin}: {key!r} is named more than once" for key in _repeated_keys(text)]
    entries = sum(len(codes) for codes in doc.values() if isinstance(codes, list))
    if entries > MAX_CODES:
        raise FaultCodeError([*problems, f"{origin}: lists {entries} codes; at most {MAX_CODES}"])
    levels: dict[str, str] = {}
    where: dict[str, str] = {}  # normalised code -> the key that listed it first
    for key, codes in doc.items():
        level = key[: -len(_SUFFIX)] if key.endswith(_SUFFIX) else ""
        if level not in faultlevels.TABLE_LEVELS:
            known = ", ".join(name + _SUFFIX for name in faultlevels.TABLE_LEVELS)
            problems.append(f"{origin}: {key!r} is not a level of the table (one of {known})")
            continue
        if not isinstance(codes, list):
            problems.append(f"{origin}: {key}: must be a list of codes")
            continue
        for code in codes:
            problem = _code_problem(code)
            if problem:
                problems.append(f"{origin}: {key}: {problem}")
                continue
            code = normalise(code)
            first = where.setdefault(code, key)
            if first != key:
                problems.append(f"{origin}: code {code} is listed under both {first} and {key}: keep it under one level")
                continue
            levels[code] = level
    if problems:
        more = len(problems) - MAX_PROBLEMS
        raise FaultCodeError(problems[:MAX_PROBLEMS] + ([f"{origin}: ... and {more} more"] if more > 0 else []))
    if not levels:
        raise FaultCodeError([f"{origin}: lists no code"])
    return FaultCodeTable(levels, origin)


def _repeated_keys(text: str) -> list[str]:
    """The top-level keys named more than once (JSON's last one would silently win). ``text``
    has already parsed as bounded JSON; numbers are not needed here, so none is converted."""
    top: list[tuple[str, Any]] = []

    def keep(items: list[tuple[str, Any]]) -> None:  # called per object, innermost first: the top level last
        top[:] = items

    json.loads(text, object_pairs_hook=keep, parse_int=lambda _: 0, parse_float=lambda _: 0.0)
    counts = Counter(key for key, _ in top)
    return [key for key, n in counts.items() if n > 1]


def _code_problem(code: Any) -> str | None:
    if not isinstance(code, str):
        return f"{str(code)[:40]!r} is not a string"
    digits = normalise(code)
    if not digits or len(digits) > MAX_CODE_DIGITS or not set(digits) <= _HEX:
        return f"{code[:40]!r} is not a hex code of 1 to {MAX_CODE_DIGITS} digits"
    return None


def load_fault_codes(path: str | None = None) -> FaultCodeTable:
    """The site's table at ``path``, or the shipped one; FaultCodeError when it cannot be used."""
    where = Path(path) if path else SHIPPED
    try:
        text = read_text_input(where, MAX_BYTES)
    except ReasonError as exc:
        raise FaultCodeError([exc.message]) from None
    return parse_fault_codes(text, shown_path(where) if path else "the shipped fault-code table")
