"""The shapes of failure every package shares, and the process exit codes.

- :class:`ReasonError`: one counted failure. ``reason`` is short and label-safe (it becomes the
  `reason` label of the self-metrics), ``message`` is for logs and callers, ``code`` is the exit
  status of the tool that failed, where one was seen.
- :class:`ProblemsError`: an input (configuration, web config, threshold table) that is wrong in
  one or more places; ``problems`` names every bad entry, so one run reports them all.
"""

from __future__ import annotations

# Exit codes of every cann-exporter command: 0 done, 1 it ran but found a failure (no chip
# read, a source failing, an abnormal verdict), 2 it could not run as asked (usage, input).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class ReasonError(Exception):
    def __init__(self, reason: str, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.code = code

    def __repr__(self) -> str:
        code = "" if self.code is None else f", code={self.code!r}"
        return f"{type(self).__name__}({self.reason!r}, {self.message!r}{code})"


class ProblemsError(Exception):
    """Bad input; ``problems`` lists every bad entry (each names where it is)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
