"""One way to open a file that came from outside the process, used by every reader.

Profile exports, configuration, web config, threshold tables, the state file and certificates
are written by someone else, sometimes by anyone who can write into a watched directory. A
path there may be a FIFO (a plain ``open`` blocks a thread for ever), ``/dev/zero`` (a plain
``read`` takes the host's memory), a symlink out of the directory, or a file with one endless
line. :func:`open_input` refuses all of them before reading a byte:

- the descriptor is opened non-blocking, so a FIFO or a device cannot stall the open, and the
  checks run on that descriptor (``fstat``), not on a path that may be swapped in between;
- only regular files pass, no larger than the caller's ``max_bytes``;
- with ``root`` given, a path whose real location leaves ``root`` is refused (a caller that
  lets links lead out of its directory passes none).

Every refusal is an :class:`InputRefused` whose ``reason`` is one of :data:`REASONS`, ready to
be counted as a label. Readers bound what they read too (a regular file can grow after the
check): :func:`read_input` never returns more than ``max_bytes``, :func:`bounded_lines` never
holds a line longer than ``max_line``.
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import io
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from exporter.core.errors import ReasonError

KiB = 1024
MiB = 1024 * KiB
StrPath = str | os.PathLike[str]

REASONS = (
    "not_found",
    "permission_denied",
    "not_regular",
    "too_large",
    "line_too_long",
    "outside_root",
    "bad_encoding",
    "unreadable",
)


class InputRefused(ReasonError):
    """A file refused before or while reading it; ``reason`` is one of :data:`REASONS`."""


MAX_SHOWN_PATH = 200  # characters of a path in a message; a path can be as long as its file system allows


def shown_path(path: StrPath) -> str:
    """``path`` for a message: its head and tail when it is longer than MAX_SHOWN_PATH."""
    text = os.fspath(path)
    if len(text) <= MAX_SHOWN_PATH:
        return text
    half = MAX_SHOWN_PATH // 2
    return f"{text[:half]}...({len(text) - 2 * half} characters)...{text[-half:]}"


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "not_found"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission_denied"
    if exc.errno == errno.ELOOP:
        return "not_regular"
    return "unreadable"


def refusal_from_os_error(path: StrPath, exc: OSError) -> InputRefused:
    """The :class:`InputRefused` for an OSError met while scanning or reading ``path``."""
    reason = _os_reason(exc)
    return InputRefused(reason, f"{shown_path(path)}: {reason.replace('_', ' ')} ({exc.strerror or exc})")


def is_within(path: StrPath, root: StrPath) -> bool:
    """True when the real location of ``path`` (symlinks resolved) is ``root`` or under it."""
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def open_input(path: StrPath, max_bytes: int, *, root: StrPath | None = None) -> BinaryIO:
    """Open ``path`` for binary reading after the checks above; the caller closes the handle."""
    name = os.fspath(path)
    if root is not None and not is_within(name, root):
        raise InputRefused("outside_root", f"{shown_path(name)}: resolves outside {shown_path(root)}")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise refusal_from_os_error(name, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputRefused("not_regular", f"{shown_path(name)}: not a regular file")
        if info.st_size > max_bytes:
            raise InputRefused("too_large", f"{shown_path(name)}: {info.st_size} bytes, more than the {max_bytes} allowed")
        # Regular files never block; clearing the flag keeps reads ordinary everywhere.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: StrPath, max_bytes: int, *, root: StrPath | None = None) -> bytes:
    """The whole file, at most ``max_bytes`` (a file that grew past it since the check is refused)."""
    with open_input(path, max_bytes, root=root) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise refusal_from_os_error(path, exc) from None
    if len(data) > max_bytes:
        raise InputRefused("too_large", f"{shown_path(path)}: more than the {max_bytes} bytes allowed")
    return data


_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode_utf8(data: bytes, name: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is dropped); any other encoding is a clear refusal."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise InputRefused("bad_encoding", f"{shown_path(name)}: {encoding} text (byte-order mark); save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputRefused("bad_encoding", f"{shown_path(name)}: not UTF-8 (byte {exc.start})") from None


def read_text_input(path: StrPath, max_bytes: int, *, root: StrPath | None = None) -> str:
    """:func:`read_input` decoded as UTF-8 with :func:`decode_utf8`."""
    data = read_input(path, max_bytes, root=root)
    return decode_utf8(data, os.fspath(path))


def bounded_lines(lines: Iterable[str] | io.TextIOBase, max_line: int, name: str = "input") -> Iterator[str]:
    """The lines of a text handle, refusing (``line_too_long``) any longer than ``max_line``.

    A text handle is read with ``readline(limit)``, so an endless line costs ``max_line``
    characters of memory, not the line.
    """
    readline = getattr(lines, "readline", None)
    if readline is None:
        for line in lines:
            if len(line) > max_line:
                raise InputRefused("line_too_long", f"{shown_path(name)}: a line longer than {max_line} characters")
            yield line
        return
    while True:
        line = readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line:
            raise InputRefused("line_too_long", f"{shown_path(name)}: a line longer than {max_line} characters")
        yield line


def regular_file_size(path: Path) -> int | None:
    """The size of ``path`` when it is a regular file (symlinks followed), else None; never raises."""
    try:
        info = path.stat()
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None
