"""A streamed CSV table whose columns are found by header name (never by position)."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from exporter.core.inputfile import InputRefused, bounded_lines
from exporter.profiles.formats.budget import Budget
from exporter.profiles.formats.common import Issue, Limits, ProfileParseError, cell_float, open_text, refused

# Rows kept one by one (one per step, per API or per operator type in real exports): a file
# with more is cut there, so what a table holds never grows with the file.
MAX_ROWS = 50_000
# A cell kept as text (an operator, kernel, API or task name; a step id): real ones are under
# 300 characters. A longer one refuses the file (cell_too_long); one kept is cut to
# budget.MAX_NAME characters and interned, and counts against the export's memory allowance.
# A header wider than MAX_COLUMNS refuses it (too_many_columns): real headers have under 60.
MAX_CELL = 1024
MAX_COLUMNS = 1024

# --- CSV plumbing ----------------------------------------------------------------------------


class Table:
    """A streamed CSV with columns looked up by (alias) header name; its lines are charged to
    ``budget`` (work) as they are read, and what its reader keeps through :meth:`kept` and
    :meth:`hold` (memory)."""

    def __init__(self, lines: Iterable[str], name: str, budget: Budget | None = None) -> None:
        self.name = name
        self.budget = budget or Budget()
        self.lines = self.budget.lines(lines)
        self.reader = csv.reader(self.lines)  # pulls one line at a time: self.lines stays in step
        self.short_rows = 0
        self.bad_rows = 0
        self.bad_values = 0  # rows numbered() skipped: no number where one was needed
        self.capped: int | None = None  # the row limit, once reached (the rest was not read)
        try:
            header = next(self.reader)
        except StopIteration:
            raise ProfileParseError("empty", f"{name}: empty file") from None
        except csv.Error as exc:
            raise ProfileParseError("malformed", f"{name}: unreadable header: {exc}") from None
        if len(header) > MAX_COLUMNS:
            raise ProfileParseError("too_many_columns", f"{name}: {len(header)} columns, more than {MAX_COLUMNS}")
        self.header = [h.strip().lstrip("\ufeff") for h in header]
        self.width = len(self.header)
        self._index = {h: i for i, h in reversed(list(enumerate(self.header)))}

    def column(self, *aliases: str) -> int | None:
        for alias in aliases:
            if alias in self._index:
                return self._index[alias]
        return None

    def require(self, *aliases: str) -> int:
        index = self.column(*aliases)
        if index is None:
            raise ProfileParseError("missing_columns", f"{self.name}: no column {' or '.join(repr(a) for a in aliases)} in header")
        return index

    def kept(self, cell: str) -> str:
        """A cell about to be kept, stripped, cut and interned (Budget.name); over MAX_CELL
        characters it refuses the file (cell_too_long)."""
        if len(cell) > MAX_CELL:
            raise ProfileParseError("cell_too_long", f"{self.name}: a name cell of {len(cell)} characters, more than {MAX_CELL}")
        return self.budget.name(cell.strip())

    def hold(self, size: int) -> None:
        """A record of about ``size`` bytes kept (Budget.hold)."""
        self.budget.hold(size)

    def rows(self, limit: int | None = MAX_ROWS) -> Iterator[list[str]]:
        """Rows as wide as the header; short (cut) rows are counted and skipped. After
        ``limit`` rows reading stops (a ``too_large`` issue)."""
        width = self.width
        count = 0
        while True:
            if limit is not None and count >= limit:
                self.capped = limit
                return
            try:
                row = next(self.reader)
            except StopIteration:
                return
            except csv.Error:
                # e.g. a NUL byte or an over-long field: lose this line, keep the rest.
                self.bad_rows += 1
                if self.bad_rows > 1000:
                    raise ProfileParseError("malformed", f"{self.name}: too many unreadable lines") from None
                continue
            if len(row) < width:
                if row:
                    self.short_rows += 1
                continue
            count += 1
            yield row

    def numbered(self, index: int) -> Iterator[tuple[list[str], float]]:
        """The rows with a number in column ``index``, each with that number; the others are
        counted as bad values (a ``bad_value`` issue)."""
        for row in self.rows():
            value = cell_float(row[index])
            if value is None:
                self.bad_values += 1
            else:
                yield row, value

    def fast_rows(self, last: int) -> Iterator[list[str]]:
        """Rows split only up to column ``last`` (index ``last + 1`` holds the unsplit rest).

        str.split is about 3x faster than the csv module on wide rows; it is exact while no
        quote falls inside the columns we read. From the first line where one does (or a
        quoted field may span lines) the csv module takes over for the rest of the file.
        """
        cut = last + 1
        for line in self.lines:
            parts = line.split(",", cut)
            quote = line.find('"')
            # a quote before the unsplit rest, or an odd count (a field going on to the next line)
            if quote >= 0 and (quote < len(line) - len(parts[-1]) or line.count('"') & 1):
                self.reader = csv.reader(itertools.chain((line,), self.lines))
                yield from self.rows(limit=None)  # aggregated by the caller: no rows kept
                return
            if len(parts) <= cut or line[-1:] not in "\r\n":
                odd = self._odd_line(line, parts, cut)
                if odd is not None:
                    yield odd
                continue
            yield parts

    def _odd_line(self, line: str, parts: list[str], cut: int) -> list[str] | None:
        """A row without its line end (the file may be cut there) or ending at a read column."""
        if not line.endswith(("\n", "\r")):
            row = next(csv.reader((line,)), [])
            if len(row) < self.width:
                self.short_rows += 1  # cut mid-row: the values in it cannot be trusted
                return None
        if len(parts) < cut:
            if line.strip():
                self.short_rows += 1
            return None
        parts[-1] = parts[-1].rstrip("\r\n")  # the read column is the row's last one
        return parts

    def issues(self, skipped_values: int = 0) -> tuple[Issue, ...]:
        """What made rows unusable; ``skipped_values``: rows the caller skipped for a bad value
        (besides those numbered() skipped)."""
        skipped_values += self.bad_values
        out = []
        if self.short_rows:
            out.append(Issue("truncated", f"{self.name}: {self.short_rows} short (cut) rows skipped"))
        if self.bad_rows:
            out.append(Issue("malformed", f"{self.name}: {self.bad_rows} unreadable lines skipped"))
        if skipped_values:
            out.append(Issue("bad_value", f"{self.name}: {skipped_values} rows with a non-numeric value skipped"))
        if self.capped is not None:
            out.append(Issue("too_large", f"{self.name}: over {self.capped} rows; the rest skipped"))
        return tuple(out)


def read_csv(path: Path, reader: Callable[[Iterable[str], str, Budget | None], Any], limits: Limits, budget: Budget | None = None) -> Any:
    """``reader`` over the lines of ``path``; a line over ``max_csv_line`` refuses the file
    (``line_too_long``) having held at most that much of it. ``budget``: the export's."""
    with open_text(path, limits.max_csv_bytes, limits) as handle:
        try:
            return reader(bounded_lines(handle, limits.max_csv_line, path.name), path.name, budget)
        except InputRefused as exc:
            raise refused(exc, path) from None
        except OSError as exc:
            raise ProfileParseError("unreadable", f"{path.name}: read failed: {exc.strerror or exc}") from None
        except UnicodeError as exc:  # errors='replace' makes this unlikely; belt and braces
            raise ProfileParseError("malformed", f"{path.name}: {exc}") from None
