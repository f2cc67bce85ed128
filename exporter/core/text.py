"""Line-level reading that the command-line tool parsers share: table rows and known messages."""

from __future__ import annotations

from collections.abc import Sequence


def table_cells(line: str) -> list[str] | None:
    """The cells of a ``| a | b |`` row, as printed (not stripped); None when the line is not a
    closed row (separators, text, a row cut before its last ``|``)."""
    if len(line) < 2 or not (line.startswith("|") and line.endswith("|")):
        return None
    return line[1:-1].split("|")


def find_message(text: str, messages: Sequence[tuple[str, str]], *, casefold: bool = False) -> tuple[str, str] | None:
    """(reason, the line that says it) for the first of ``messages`` (needle, reason) in ``text``.

    Tools print their errors on stdout or stderr with unreliable exit codes, so a fixed
    message is what identifies an error.
    """
    haystack = text.casefold() if casefold else text
    for needle, reason in messages:
        at = haystack.find(needle.casefold() if casefold else needle)
        if at >= 0:
            return reason, line_at(text, at)
    return None


def line_at(text: str, index: int, limit: int = 200) -> str:
    """The stripped line of ``text`` that holds position ``index``, at most ``limit`` characters."""
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end >= 0 else len(text)].strip()[:limit]
