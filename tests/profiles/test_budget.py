"""What one export may cost (exporter/profiles/formats/budget.py): names kept are cut and
interned, every name and record kept counts against the export's memory allowance while the
file is read (the file that goes past it is refused, what it held given back), and the work of
parsing counts against a budget past which the whole export is refused."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.profiles.formats.budget import (
    HOST_STEP,
    KERNEL_GROUP,
    MAX_NAME,
    MEMCPY_TASK,
    NAME_BYTES,
    TABLE_ROW,
    Budget,
)
from exporter.profiles.formats.common import Limits, ProfileParseError
from exporter.profiles.formats.csvtable import MAX_ROWS
from exporter.profiles.formats.info import MAX_COMMUNICATION_OPS, read_communication, read_json_file
from exporter.profiles.formats.jsonstream import JsonCaps
from exporter.profiles.formats.tables import op_type_from_name, read_api_statistic, read_kernels, read_op_statistic, read_step_trace
from exporter.profiles.formats.trace import read_trace
from exporter.profiles.load import load_profile
from tests.support.profile_exports import PT_LEVEL1, build

OUT = "ASCEND_PROFILER_OUTPUT"
KERNEL_HEADER = "Step Id,Name,Type,Accelerator Core,Duration(us)\n"
OP_HEADER = "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"


class Counted:
    """Lines handed out one at a time, counting how many were taken."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines, self.taken = lines, 0

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.taken += 1
            yield line


def long_types(rows: int, header: str = KERNEL_HEADER) -> Iterator[str]:
    """The issue's file: every row its own 1,000-character operator type (and kernel name)."""
    yield header
    for i in range(rows):
        name = f"{i:06d}" + "T" * 994
        yield f"1,{name},{name},AI_CORE,1.0\n" if header == KERNEL_HEADER else f"{name},AI_CORE,1,1.0,1.0,1.0,1.0,1.0\n"


def test_names_kept_are_cut_and_interned() -> None:
    long = "Conv2D" + "x" * 2000
    budget = Budget()
    first, second = budget.name(long[:900]), budget.name("Conv2D" + "x" * 900)
    assert len(first) == MAX_NAME and first is second  # one copy of each distinct (cut) name
    assert budget.held == MAX_NAME + NAME_BYTES  # charged once
    text = KERNEL_HEADER + "".join(f"{step},k_{'y' * 500},{'Op' * 300},AI_CORE,2.0\n" for step in (1, 1, 2))
    table = read_kernels(io.StringIO(text))
    types = [op for step in table.steps for op in step.op_types]
    assert [len(op.op_type) for op in types] == [MAX_NAME, MAX_NAME] and types[0].op_type is types[1].op_type
    assert [op.count for op in types] == [2, 1]  # rows of one cut name meet in one group
    assert all(len(s.longest_name or "") == MAX_NAME for s in table.steps)


def test_the_issues_tables_are_refused_while_they_are_read_not_after_the_row_cap() -> None:
    """60,000 rows of 1,000-character operator types: before, every name of 50,000 rows was held
    and the rest skipped as too_large; now the file is refused once the allowance is spent, long
    before the row cap, and what it held is given back."""
    for reader, header in ((read_kernels, KERNEL_HEADER), (read_op_statistic, OP_HEADER)):
        lines, budget = Counted(long_types(60_000, header)), Budget()
        with pytest.raises(ProfileParseError) as refused:
            with budget.reading("kernel_details.csv"):
                reader(lines, "kernel_details.csv", budget)
        assert refused.value.reason == "memory_budget" and "kernel_details.csv" in refused.value.message
        allowance = Limits().max_export_memory
        assert lines.taken < allowance // (MAX_NAME + NAME_BYTES + TABLE_ROW) + 1024 < MAX_ROWS  # stopped as the allowance ran out
        assert budget.held == 0 and budget.name("x") == "x"  # given back: the next file starts afresh


def test_a_refused_file_costs_that_file_the_rest_of_the_export_is_used(tmp_path: Path) -> None:
    export = build(tmp_path / "job" / "host_1_ascend_pt", PT_LEVEL1)
    for name, header in (("kernel_details.csv", KERNEL_HEADER), ("op_statistic.csv", OP_HEADER)):
        (export / OUT / name).write_text("".join(long_types(60_000, header)))
    (data,) = load_profile(export, "torch_npu", "job")
    assert {i.reason for i in data.issues} == {"memory_budget"} and len(data.issues) == 2
    assert data.steps and data.trace and data.communication and data.api  # every other file was read
    assert data.kernels is None and data.op_statistic is None


def _traced(run: Callable[[Budget], Any]) -> tuple[int, Budget]:
    budget = Budget(memory=1 << 40)
    tracemalloc.start()
    try:
        run(budget)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, budget


@pytest.mark.parametrize(
    ("what", "run", "each"),
    [
        (
            "kernel groups",
            lambda b: read_kernels((KERNEL_HEADER, *(f"{i % 50},k{i % 7},T{i},AI_CORE,1.5\n" for i in range(20_000))), budget=b),
            KERNEL_GROUP,
        ),
        (
            "step rows",
            lambda b: read_step_trace(
                ("Step,Computing,Communication(Not Overlapped),Free\n", *(f"{i},1,2,3\n" for i in range(20_000))), budget=b
            ),
            TABLE_ROW,
        ),
        (
            "API rows",
            lambda b: read_api_statistic(("Level,API Name,Time(us),Count\n", *(f"acl,a{i % 9},1.5,2\n" for i in range(20_000))), budget=b),
            TABLE_ROW,
        ),
    ],
)
def test_the_estimates_are_not_below_what_is_held(what: str, run: Callable[[Budget], Any], each: int) -> None:
    """The allowance counts estimates: the traced peak of reading a table (its transient rows
    included) stays below what its budget was charged."""
    peak, budget = _traced(run)
    assert peak <= budget.held, (what, peak, budget.held)
    assert budget.held >= 20_000 * each


def test_the_trace_estimates_are_not_below_what_is_held() -> None:
    events = [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "Ascend Hardware"}}]
    events += [
        {"ph": "X", "name": "MEMCPY_ASYNC", "pid": 7, "ts": f"{i}.5", "dur": 1.5, "args": {"Task Type": "SDMA_SQE"}} for i in range(20_000)
    ]
    events += [{"ph": "X", "name": f"ProfilerStep#{i}", "pid": 8, "ts": f"{i}.5", "dur": 1.5} for i in range(20_000)]
    text = json.dumps(events).encode()
    peak, budget = _traced(lambda b: read_trace(io.BytesIO(text), "trace_view.json", budget=b))
    assert 20_000 * (MEMCPY_TASK + HOST_STEP) <= budget.held and peak <= budget.held


def test_string_pids_are_kept_cut_and_count_against_the_allowance() -> None:
    """A pid may be any JSON string up to an event's 1 MiB: kept per copy and per process it
    would have held gigabytes; cut and interned, equal pids still meet."""
    pid = "p" * 100_000
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "Ascend Hardware"}}]
    events += [{"ph": "X", "name": "MEMCPY_ASYNC", "pid": pid, "ts": f"{i}", "dur": 1.0} for i in range(3)]
    trace = read_trace(io.BytesIO(json.dumps(events).encode()), "trace_view.json")
    assert len(trace.memcpy) == 3  # the copies' pid met its process name: Ascend Hardware
    many = [{"ph": "X", "name": "Free", "pid": f"{i:08d}" + "q" * 2000, "ts": "1", "dur": 1.0} for i in range(4_000)]
    with pytest.raises(ProfileParseError) as refused:
        read_trace(io.BytesIO(json.dumps(many).encode()), "trace_view.json", budget=Budget(memory=1 << 20))
    assert refused.value.reason == "memory_budget"


def tiny_ops(path: Path, ops: int) -> None:
    """The issue's communication.json: one step of ``ops`` empty ops (12 bytes each)."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('{"step1": {"collective": {')
        handle.write(",".join(f'"{i}":{{}}' for i in range(ops)))
        handle.write("}}}")


def test_the_five_million_op_file_is_refused_after_a_bounded_amount_of_work(tmp_path: Path) -> None:
    """60 MB of one step with 5,000,000 empty ops cost 85 s of one core (refused in 0.2 s now):
    ops are what a communication file costs, so it holds at most MAX_COMMUNICATION_OPS."""
    path = tmp_path / "communication.json"
    tiny_ops(path, 5_000_000)
    assert path.stat().st_size > 60 << 20
    budget = Budget()
    with pytest.raises(ProfileParseError) as refused:
        read_json_file(path, read_communication, Limits(), budget=budget)
    assert refused.value.reason == "too_many_objects" and f"more than {MAX_COMMUNICATION_OPS}" in refused.value.message
    assert budget.worked < 2_000_000  # about 0.3 s of one core; the whole file costs 26 M


def test_a_spent_work_budget_refuses_the_whole_export(tmp_path: Path) -> None:
    export = build(tmp_path / "job" / "host_1_ascend_pt", PT_LEVEL1)
    tiny_ops(export / OUT / "communication.json", 150_000)
    with pytest.raises(ProfileParseError) as refused:
        load_profile(export, "torch_npu", "job", Limits(max_export_work=500_000))
    assert refused.value.reason == "cpu_budget" and "communication.json" in refused.value.message
    (data,) = load_profile(export, "torch_npu", "job")  # within the default budget
    assert data.communication[0].step == 1


def test_work_is_charged_for_every_kind_of_file() -> None:
    """Counted as read, so a budget stops any file, whatever it holds: CSV lines (blank ones
    too), JSON values skipped or built, and bytes."""
    blank = Counted(iter([KERNEL_HEADER, *("\n" for _ in range(100_000))]))
    with pytest.raises(ProfileParseError) as refused:
        read_kernels(blank, budget=Budget(work=50_000))
    assert refused.value.reason == "cpu_budget" and blank.taken < 20_000
    skipped = b'{"traceEvents": [], "x": [' + b"1," * 200_000 + b"1]}"
    with pytest.raises(ProfileParseError) as refused:
        read_trace(io.BytesIO(skipped), "trace_view.json", budget=Budget(work=100_000))
    assert refused.value.reason == "cpu_budget"
    budget = Budget()
    read_communication(
        b'{"step1": {"collective": {"op": {"Communication Time Info": {"Elapse Time(ms)": 1}}}}}', caps=JsonCaps(budget=budget)
    )
    assert 0 < budget.worked < 100


def test_a_level0_name_is_guessed_in_time_linear_in_its_length() -> None:
    """A regular expression for the trailing index took time quadratic in a run of digits with
    the GIL held: a 230,000-digit name (one CSV line) kept SIGTERM waiting for minutes."""
    assert op_type_from_name("Conv2D12") == "Conv2D" and op_type_from_name("trans_TransData_3") == "TransData"
    assert op_type_from_name("1" * 1_000_000 + "x") == "1" * 1_000_000 + "x"
    text = KERNEL_HEADER + "1," + "7" * 900_000 + "x,N/A,AI_CORE,1.0\n"
    with pytest.raises(ProfileParseError) as refused:
        read_kernels(io.StringIO(text))
    assert refused.value.reason == "cell_too_long"
    (step,) = read_kernels(io.StringIO(KERNEL_HEADER + "1," + "7" * 1000 + "x,N/A,AI_CORE,1.0\n")).steps
    assert len(step.op_types[0].op_type) == MAX_NAME  # guessed from the cut name
