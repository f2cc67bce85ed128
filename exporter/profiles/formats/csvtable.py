"""A streamed CSV table whose columns are found by header name (never by position)."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Iterator

from exporter.profiles.formats.common import Issue, ProfileParseError, cell_float

# Rows kept one by one (one per step, per API or per operator type in real exports): a file
# with more is cut there, so what a table holds never grows with the file.
MAX_ROWS = 50_000
# A cell kept as text (an operator, kernel, API or task name; a step id): real ones are under
# 300 characters. A longer one refuses the file (cell_too_long), so what the rows kept above
# hold is at most this much each. A header wider than MAX_COLUMNS refuses it (too_many_columns):
# real headers have under 60.
MAX_CELL = 1024
MAX_COLUMNS = 1024

# --- CSV plumbing ----------------------------------------------------------------------------


class Table:
    """A streamed CSV with columns looked up by (alias) header name."""

    def __init__(self, lines: Iterable[str], name: str) -> None:
        self.name = name
        self.lines = iter(lines)
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

    def kept(self, *cells: str) -> None:
        """Refuses the file (cell_too_long) when a cell about to be kept is over MAX_CELL."""
        for cell in cells:
            if len(cell) > MAX_CELL:
                raise ProfileParseError("cell_too_long", f"{self.name}: a name cell of {len(cell)} characters, more than {MAX_CELL}")

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
