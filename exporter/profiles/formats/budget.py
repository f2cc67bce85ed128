"""What reading one export may cost: the memory its files make us hold and the work parsing
them takes, both checked while the files are read (docs/formats/profiler-exports.md, "What a
watched directory can cost").

Memory. Every name kept (an operator type, a kernel, API or task name, a step key, a process
id, a job name) is cut to :data:`MAX_NAME` characters and interned for the export: one copy of
each distinct name, charged once. Every record kept (a kernel group, a table row, a copy, a
step, a process) is charged an estimate of its size. Once more than the allowance is held,
the file being read is refused (``memory_budget``) and what it held is given back: the files
read before and after it are still used.

Work. Parsing costs about the same per JSON value (more for one whose path is looked at, or
one built into an item), per JSON item handed to a reader (a trace event, a communication op),
per CSV line and per 32 bytes read, whatever a file holds; they are counted in work units
(:data:`JSON_VALUE`, :data:`JSON_WALK`, :data:`JSON_BUILT`, :data:`JSON_ITEM`,
:data:`CSV_LINE`, :data:`UNIT_BYTES`), settled every read block or every
:data:`LINES_PER_CHARGE` lines. Weighed so, a unit costs 100-160 ns of one core whatever the
file's shape (benchmarks/profile_budget.py), so the default budget holds a core at most about
25 s. Past the budget the export is refused (``cpu_budget``): nothing of it is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice

from exporter.profiles.formats.common import Limits, ProfileParseError

MAX_NAME = 256  # characters of a name kept: real operator, kernel and API names are under 300
NAME_BYTES = 120  # what a kept name costs beyond its characters: the str, its slot in the intern table

# Estimated bytes of each record kept, as held while the file is read and once it is converted
# (tests/profiles/test_budget.py measures them with tracemalloc and checks they are not below).
KERNEL_GROUP = 720  # a (step, operator type, core) group of kernel rows, and its OpTypeTime
GUESSED_TYPE = 160  # a kernel name whose operator type was guessed (Level0)
TABLE_ROW = 400  # a StepTime, ApiStat, Iteration or OpTypeTime row
TASK_TYPE = 200  # a task_time kind
HOST_STEP = 200  # a ProfilerStep span
MEMCPY_TASK = 240  # a MEMCPY_ASYNC task
PROCESS = 600  # a trace process: its name, its label or its Overlap Analysis sums
COMMUNICATION_STEP = 320  # a step of communication.json
DEVICE_EVENT = 40  # a torch.profiler device event or host span, in compact arrays

# Work units. Measured on one core (benchmarks/profile_budget.py; docs/formats/profiler-exports.md,
# "What a watched directory can cost"), a unit is 100-160 ns of parsing whatever the file holds.
UNIT_BYTES = 32  # bytes read per unit
JSON_VALUE = 1  # an object, array or scalar
JSON_WALK = 2  # more for one met outside an item (its path is looked at)
JSON_BUILT = 1  # more for one built into an item (a dict or list entry made)
JSON_ITEM = 4  # an item handed to its reader (a trace event, a communication op)
CSV_LINE = 4  # a CSV line (its bytes counted apart)
LINES_PER_CHARGE = 1024  # CSV lines counted between two charges


class Budget:
    """The memory allowance and the work budget of one export's parse.

    Files are read inside :meth:`reading`; a file that fails gives back what it held (its
    records and the names it interned), so the next file starts where the one before ended.
    """

    def __init__(self, memory: int = Limits.max_export_memory, work: int = Limits.max_export_work) -> None:
        self.memory, self.work_limit = memory, work
        self.held = self.worked = 0
        self.file = "export"
        self._names: dict[str, str] = {}

    @classmethod
    def of(cls, limits: Limits) -> Budget:
        return cls(limits.max_export_memory, limits.max_export_work)

    def name(self, text: str) -> str:
        """``text`` cut to MAX_NAME characters, one copy per distinct name (charged once)."""
        text = text[:MAX_NAME]
        found = self._names.get(text)
        if found is None:
            self.hold(len(text) + NAME_BYTES)
            found = self._names[text] = text
        return found

    def hold(self, size: int) -> None:
        """``size`` more bytes held; past the allowance the file being read is refused."""
        self.held += size
        if self.held > self.memory:
            raise ProfileParseError(
                "memory_budget",
                f"{self.file}: holds more than the export's memory allowance of {self.memory >> 20} MiB "
                "(a fixed bound, docs/formats/profiler-exports.md); the file is not used",
            )

    def work(self, units: int) -> None:
        """``units`` more work done; past the budget the export is refused."""
        self.worked += units
        if self.worked > self.work_limit:
            raise ProfileParseError(
                "cpu_budget",
                f"{self.file}: parsing the export took more than {self.work_limit:,} work units "
                "(a fixed bound, docs/formats/profiler-exports.md); the export is not used",
            )

    @contextmanager
    def reading(self, file: str) -> Iterator[None]:
        """One file read against the budget; if it fails, what it held is given back."""
        held, names, self.file = self.held, len(self._names), file
        try:
            yield
        except BaseException:
            self.held = held
            for added in list(islice(reversed(self._names), len(self._names) - names)):
                del self._names[added]
            raise

    def lines(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` with each one's work charged (CSV_LINE, and its bytes)."""
        count = size = 0
        for line in lines:
            count += 1
            size += len(line)
            if count >= LINES_PER_CHARGE:
                self.work(count * CSV_LINE + size // UNIT_BYTES)
                count = size = 0
            yield line
        self.work(count * CSV_LINE + size // UNIT_BYTES)
