"""Property: whatever text a profile file holds, the parsers return their record or raise
ProfileParseError - nothing else escapes."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.profiles.formats.common import ProfileParseError
from exporter.profiles.formats.info import (
    read_communication,
    read_job_name,
    read_profiler_info,
)
from exporter.profiles.formats.tables import (
    ApiStatistic,
    IterationTable,
    KernelTable,
    OpStatistic,
    StepTraceTable,
    TaskTime,
    read_api_statistic,
    read_kernels,
    read_msprof_step_trace,
    read_op_statistic,
    read_step_trace,
    read_task_time,
)
from exporter.profiles.formats.trace import TraceData, read_trace
from tests.support.profile_exports import FIXTURES

HEADERS = sorted({line for path in FIXTURES.glob("*.csv") for line in [path.read_text(encoding="utf-8").splitlines()[0]]})
CELLS = st.one_of(
    st.sampled_from(["N/A", "", "nan", "inf", "-1", "50", "1e308", "12.5\t", '"a,b"', '"""3,4"""', "HCCL", "hcom_x", "\x00"]),
    st.text(alphabet=',"\t\r\n 0123456789.-eE/NAabc\x00\ufeff', max_size=12),
)
CSV_TEXT = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda header, rows, nl: header + nl + nl.join(",".join(r) for r in rows),
        st.sampled_from(HEADERS),
        st.lists(st.lists(CELLS, max_size=50), max_size=8),
        st.sampled_from(["\n", "\r\n", "\r"]),
    ),
)
CSV_READERS = [
    (read_step_trace, StepTraceTable),
    (read_kernels, KernelTable),
    (read_op_statistic, OpStatistic),
    (read_task_time, TaskTime),
    (read_api_statistic, ApiStatistic),
    (read_msprof_step_trace, IterationTable),
]
JSON_TEXT = st.one_of(
    st.text(alphabet='[]{}",:0123456789.-eEtruefalsn \n\\ph"XMnamets', max_size=300),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(
                st.sampled_from(
                    [
                        "ph",
                        "name",
                        "ts",
                        "dur",
                        "pid",
                        "args",
                        "step1",
                        "collective",
                        "Communication Time Info",
                        "Elapse Time(ms)",
                        "Wait Time(ms)",
                        "rank_id",
                        "end_info",
                        "config",
                        "job_name",
                        "traceEvents",
                    ]
                ),
                inner,
                max_size=5,
            ),
        ),
        max_leaves=20,
    ).map(lambda v: __import__("json").dumps(v)),
).flatmap(lambda text: st.integers(0, len(text)).map(lambda cut: text[:cut] if cut else text))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=CSV_TEXT)
def test_csv_readers_raise_only_profile_parse_error(text: str) -> None:
    for reader, kind in CSV_READERS:
        try:
            result = reader(io.StringIO(text, newline=""), "f.csv")
        except ProfileParseError as exc:
            assert exc.reason and exc.message
        else:
            assert isinstance(result, kind)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=JSON_TEXT)
def test_json_readers_raise_only_profile_parse_error(text: str) -> None:
    try:
        assert isinstance(read_trace(io.StringIO(text)), TraceData)
    except ProfileParseError as exc:
        assert exc.reason
    for reader in (read_communication, read_profiler_info, read_job_name):
        try:
            reader(text, "f.json")
        except ProfileParseError as exc:
            assert exc.reason


def test_odd_event_shapes() -> None:
    text = (
        '[{"ph": "M", "name": "process_name", "pid": [1], "args": {"name": "x"}}, {"ph": "X", "name": "Free", "pid": {}, "ts": "1"},'
        ' {"ph": "X", "name": "MEMCPY_ASYNC", "pid": 1, "ts": "nan", "dur": "1e999"}, {"ph": "X", "name": "ProfilerStep#x", "ts": 1}]'
    )
    trace = read_trace(io.StringIO(text))
    assert trace.events == 4 and trace.host_steps == () and trace.memcpy == ()


NAMES = st.text(alphabet='abAB_,"\n\r 0123', min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(1, 3),
            NAMES,
            st.sampled_from(["MatMul", "Add", "N/A", "a,b", 'q"t']),
            st.sampled_from(["AI_CORE", "HCCL"]),
            st.integers(0, 10_000),
            NAMES,
        ),
        max_size=30,
    )
)
def test_split_fast_path_agrees_with_the_csv_module(rows) -> None:
    """Whatever quoting csv.writer needed, the totals are those of the rows written."""
    import csv

    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["Step Id", "Name", "Type", "Accelerator Core", "Duration(us)", "Input Shapes"])
    for step, name, op_type, core, duration, shapes in rows:
        writer.writerow([step, name, op_type, core, duration / 4, shapes])
    table = read_kernels(io.StringIO(out.getvalue(), newline=""))
    assert table.rows == len(rows) and table.issues == ()
    for step in {r[0] for r in rows}:
        (got,) = [s for s in table.steps if s.step == step]
        mine = [r for r in rows if r[0] == step]
        assert got.compute_us + got.communication_us == sum(r[4] / 4 for r in mine)
        assert got.communication_us == sum(r[4] / 4 for r in mine if r[3] == "HCCL" or r[1].startswith("hcom_"))
