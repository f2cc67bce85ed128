"""One self-overwriting progress line on stderr while queries run, only on a terminal."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO, label: str, total: int | None = None, enabled: bool | None = None) -> None:
        self.stream, self.label, self.total = stream, label, total
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) if enabled is None else enabled
        self.count = 0
        self.started = time.monotonic()
        self._width = 0

    def step(self, what: str) -> None:
        self.count += 1
        if not self.enabled:
            return
        of = f"/{self.total}" if self.total else ""
        line = f"{self.label}: {self.count}{of} {what}"[:100]
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
