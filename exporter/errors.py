"""The one shape of a counted failure: a short, label-safe ``reason`` for the self-metrics'
`reason` label, a message for logs and callers, and the exit ``code`` where one was seen."""

from __future__ import annotations


class ReasonError(Exception):
    def __init__(self, reason: str, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        code = "" if self.code is None else f", code={self.code!r}"
        return f"{type(self).__name__}({self.reason!r}, {self.message!r}{code})"
