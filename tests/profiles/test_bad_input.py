"""Bad input: skipped or partly used, with a clear message and a reason; never a crash."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from exporter.core.inputfile import refusal_from_os_error
from exporter.profiles.formats import common as formats_common
from exporter.profiles.formats.common import Limits, ProfileParseError
from exporter.profiles.formats.info import read_communication, read_profiler_info
from exporter.profiles.formats.jsonstream import JsonCaps, trace_events
from exporter.profiles.formats.tables import read_api_statistic, read_kernels, read_op_statistic, read_step_trace
from exporter.profiles.formats.trace import read_trace
from exporter.profiles.indicators import summarize
from exporter.profiles.load import load_profile
from tests.support.profile_builders import Copy, Kernel, Step, torch_profile, write
from tests.support.profile_exports import PT_LEVEL1, build, fixture_path

approx = pytest.approx
OUT = "ASCEND_PROFILER_OUTPUT"


def sample_bytes(name: str) -> bytes:
    return fixture_path(name).read_bytes()


def reasons(issues) -> set[str]:
    return {i.reason for i in issues}


# --- CSV ---------------------------------------------------------------------------------------


def test_csv_cut_mid_row_keeps_complete_rows() -> None:
    raw = sample_bytes("pt_level1_kernel_details.csv").decode()
    cut = raw[: raw.rindex("hcom_allReduce__586_3_1") + 30]  # inside the last row
    table = read_kernels(io.StringIO(cut, newline=""), "kernel_details.csv")
    assert table.rows == 29
    assert reasons(table.issues) == {"truncated"}
    assert "1 short (cut) rows skipped" in table.issues[0].message
    assert table.steps[0].communication_us == approx(79089.52 + 2281.105 + 2402.388)  # 3 of the 4 HCCL rows


def test_missing_duration_column_is_a_clear_error() -> None:
    text = "Step Id,Name,Type,Accelerator Core,Start Time(us)\n1,a,A,AI_CORE,1.0\n"
    with pytest.raises(ProfileParseError) as err:
        read_kernels(io.StringIO(text), "kernel_details.csv")
    assert err.value.reason == "missing_columns"
    assert "Duration(us)" in err.value.message and "kernel_details.csv" in err.value.message


def test_na_in_numeric_columns_skips_those_rows() -> None:
    text = (
        "Step Id,Name,Type,Accelerator Core,Duration(us),Wait Time(us)\n"
        "1,a,A,AI_CORE,N/A,N/A\n1,b,B,AI_CORE,30.0,N/A\n1,c,C,AI_CORE,nan,0\n1,d,D,AI_CORE,10.0,2.5\n"
    )
    table = read_kernels(io.StringIO(text))
    (step,) = table.steps
    assert step.compute_us == 30.0 + 10.0 and step.wait_us == 2.5
    assert reasons(table.issues) == {"bad_value"} and "2 rows" in table.issues[0].message
    with pytest.raises(ProfileParseError) as err:
        read_kernels(io.StringIO("Name,Duration(us)\na,N/A\n"))
    assert err.value.reason == "bad_value"


def test_na_in_step_trace_drops_the_row() -> None:
    text = "Step,Computing,Communication(Not Overlapped),Free\n1,N/A,1,1\n2,10,0,5\n"
    table = read_step_trace(io.StringIO(text))
    assert [r.step for r in table.rows] == [2] and reasons(table.issues) == {"bad_value"}


def test_crlf_lf_and_trailing_tabs_read_alike() -> None:
    lines = [
        "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)",
        "3,a,A,AI_CORE,1736408883704643.212\t,12.5\t",
        '3,b,B,AI_CORE,"1736408883704700.000\t",7.5 ',
    ]
    for newline in ("\r\n", "\n"):
        (step,) = read_kernels(io.StringIO(newline.join(lines) + newline, newline="")).steps
        assert (step.step, step.compute_us, [o.op_type for o in step.op_types]) == (3, 12.5 + 7.5, ["A", "B"])


def test_header_only_empty_and_garbage() -> None:
    assert read_kernels(io.StringIO("Name,Duration(us)\n")).steps == ()
    for text, reason in (("", "empty"), ("\x00\x01\x02garbage", "missing_columns"), ("a,b\n1,2\n", "missing_columns")):
        with pytest.raises(ProfileParseError) as err:
            read_kernels(io.StringIO(text))
        assert err.value.reason == reason


def test_nul_bytes_and_overlong_fields_lose_only_their_line() -> None:
    text = "Name,Duration(us)\na,1.0\nb\x00,2.0\nc," + "9" * 200_000 + "\nd,4.0\n"
    table = read_kernels(io.StringIO(text))
    assert table.steps[0].compute_us == 1.0 + 2.0 + 4.0
    assert reasons(table.issues) == {"bad_value"}  # the 200,000-digit "duration" is no duration
    quoted = 'Name,Duration(us)\na,1.0\n"b\x00",2.0\n"c,' + "9" * 200_000 + '",3\nd,4.0\n'
    table = read_kernels(io.StringIO(quoted))  # quotes: the csv module reads, its field limit applies
    assert table.steps[0].compute_us in (1.0 + 4.0, 1.0 + 2.0 + 4.0)  # NUL is legal for csv on some Pythons
    assert "malformed" in reasons(table.issues)


# --- JSON --------------------------------------------------------------------------------------------


def test_trace_cut_mid_way_uses_events_before_the_cut() -> None:
    raw = sample_bytes("pt_level1_trace_view_excerpt.json").decode()
    cut = raw[: raw.index('"name": "MEMCPY_ASYNC", "pid": 3170820512, "tid": 2, "ts": "1736408883745588.991"') + 20]
    trace = read_trace(io.StringIO(cut))
    assert [m.duration_us for m in trace.memcpy] == [840.07675]  # the second copy was past the cut
    assert reasons(trace.issues) == {"truncated"}
    assert "cut short" in trace.issues[0].message


def test_json_streaming_across_read_blocks() -> None:
    events = [{"ph": "X", "name": f"e{i}", "ts": str(i), "dur": 1.0, "args": {"s": "x" * (i % 50)}} for i in range(5000)]
    import json

    text = json.dumps(events)
    assert len(text) > 4 * 64 * 1024  # several read blocks
    assert list(trace_events(io.StringIO(text), "t.json", JsonCaps())) == events
    assert list(trace_events(io.BytesIO(b"\xef\xbb\xbf" + text.encode()), "t.json", JsonCaps())) == events  # BOM dropped
    assert list(trace_events(io.StringIO(" [ ] "), "t.json", JsonCaps())) == []


@pytest.mark.parametrize(
    "text,reason",
    [
        ("", "empty"),
        ("  \n", "empty"),
        ("[", "truncated"),
        ('[{"a": 1}, {"b": ', "truncated"),
        ('[{"a": "x', "truncated"),
        ("{not json", "malformed"),
        ("42", "malformed"),
        ('[{"a": 1} {"b": 2}, ???]', "malformed"),
        ('{"traceEvents": 3}', "malformed"),
        ('{"other": []}', "malformed"),
        ("[" + "9" * 5000 + "]", "malformed"),
        ("[" * 100_000, "too_deep"),
        ('[{"a": ' + "[" * 70 + "]" * 70 + "}]", "too_deep"),
        ('[{"a": "' + "x" * (2 << 20) + '"}]', "item_too_large"),
        ("[[" + "0," * 100_001 + "0]]", "item_too_large"),
    ],
)
def test_json_errors_have_reasons(text: str, reason: str) -> None:
    with pytest.raises(ProfileParseError) as err:
        list(trace_events(io.StringIO(text), "t.json", JsonCaps()))
    assert err.value.reason == reason
    assert err.value.message.startswith("t.json: ") and len(err.value.message) < 200  # no excerpt of the file


def test_trace_with_a_bad_event_keeps_the_good_ones() -> None:
    trace = read_trace(io.StringIO('[{"ph": "X", "name": "MEMCPY_ASYNC", "ts": "1", "dur": 2.0}, 17, ???]'))
    assert [m.duration_us for m in trace.memcpy] == [2.0]
    assert reasons(trace.issues) == {"malformed", "bad_value"}  # `17` is not an event; `???` is not JSON


def test_small_json_cut_or_wrong_shape() -> None:
    raw = sample_bytes("pt_level1_communication.json").decode()
    with pytest.raises(ProfileParseError) as err:
        read_communication(raw[:2000])
    assert err.value.reason == "truncated"
    with pytest.raises(ProfileParseError) as err:
        read_profiler_info("[1, 2]")
    assert err.value.reason == "malformed"


def test_caps_on_what_a_json_file_keeps_refuse_it_by_name() -> None:
    with pytest.raises(ProfileParseError) as err:  # the issue's file: an array where steps are expected
        read_communication("[" + "{}," * 1000 + "{}]")
    assert err.value.reason == "malformed"
    with pytest.raises(ProfileParseError) as err:
        read_communication('{"step1": [' + "{}," * 1000 + "{}]}", caps=JsonCaps(file_values=500))
    assert err.value.reason == "too_many_objects"
    with pytest.raises(ProfileParseError) as err:
        read_communication("{" + ",".join(f'"step{i}": {{}}' for i in range(10_001)) + "}")
    assert err.value.reason == "too_many_objects" and "10000 steps" in err.value.message
    with pytest.raises(ProfileParseError) as err:
        read_trace(io.StringIO("[" + '{"ph": "M"},' * 10 + '{"ph": "M"}]'), limits=Limits(max_trace_events=5))
    assert err.value.reason == "too_many_events"  # a cap refuses the file: no partial use
    with pytest.raises(ProfileParseError) as err:
        read_profiler_info('{"a": "' + "x" * 200_000 + '"}', caps=JsonCaps(item_bytes=1000))  # checked per 64 KiB read
    assert err.value.reason == "item_too_large"


def test_trace_processes_and_steps_kept_are_bounded() -> None:
    events = [{"ph": "M", "name": "process_name", "pid": i, "args": {"name": "Overlap Analysis" + "x" * 100 * (i % 2)}} for i in range(20)]
    events += [{"ph": "X", "name": "Free", "pid": i, "ts": "1", "dur": 1.0} for i in range(20)]
    events += [{"ph": "X", "name": f"ProfilerStep#{i}", "pid": 0, "ts": str(i), "dur": 1.0} for i in range(20)]
    import json

    trace = read_trace(io.StringIO(json.dumps(events)), limits=Limits(max_trace_processes=8, max_host_steps=5))
    assert len(trace.overlaps) == 4  # 8 pids kept; the long names are kept as '' (not Overlap Analysis)
    assert len(trace.host_steps) == 5
    assert reasons(trace.issues) == {"too_large"} and len(trace.issues) == 2


def test_csv_name_cells_and_headers_are_bounded() -> None:
    long = "T" * 2000
    with pytest.raises(ProfileParseError) as err:
        read_op_statistic(io.StringIO(f"OP Type,Total Time(us)\n{long},1.0\n"), "op_statistic.csv")
    assert err.value.reason == "cell_too_long" and long not in err.value.message
    with pytest.raises(ProfileParseError) as err:
        read_kernels(io.StringIO(f"Name,Type,Duration(us)\nk,A,1.0\nk,{long},2.0\n"), "kernel_details.csv")
    assert err.value.reason == "cell_too_long"
    with pytest.raises(ProfileParseError) as err:
        read_api_statistic(io.StringIO(f"API Name,Time(us)\n{long},1.0\n"), "api_statistic.csv")
    assert err.value.reason == "cell_too_long"
    with pytest.raises(ProfileParseError) as err:
        read_step_trace(io.StringIO(",".join(f"c{i}" for i in range(1025)) + "\n"), "step_trace_time.csv")
    assert err.value.reason == "too_many_columns"
    ok = read_op_statistic(io.StringIO(f"OP Type,Total Time(us)\n{'T' * 1024},1.0\n"), "op_statistic.csv")
    assert ok.op_types[0].total_us == 1.0


# --- whole profiles ---------------------------------------------------------------------------------


def test_broken_files_become_issues_rest_still_used(tmp_path: Path) -> None:
    path = build(tmp_path / "r_ascend_pt", PT_LEVEL1)
    write(path / OUT / "kernel_details.csv", "Step Id,Name\n50,x\n")  # no duration column
    raw = sample_bytes("pt_level1_trace_view_excerpt.json")
    write(path / OUT / "trace_view.json", raw[: len(raw) // 2])  # cut mid-way
    write(path / OUT / "communication.json", b'{"step50": {')  # cut
    (data,) = load_profile(path, "torch_npu", "job")
    assert reasons(data.issues) == {"missing_columns", "truncated"}
    (summary,) = summarize(data)
    e2e = 8873.756000000001 + 101963.203 + 25744.050000000003
    assert summary.compute_ratio == approx(8873.756000000001 / e2e)  # step_trace still used
    assert summary.operator_source == "op_statistic"  # fallback for the op shares
    assert any("kernel_details.csv" in i for i in summary.issues)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root chmod does not stop reads, so the open itself is made to fail."""
    path = build(tmp_path / "r_ascend_pt", PT_LEVEL1)
    real = formats_common.open_input

    def deny(file, *args, **kwargs):
        if str(file).endswith("kernel_details.csv"):
            raise refusal_from_os_error(file, PermissionError(13, "Permission denied", str(file)))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(formats_common, "open_input", deny)
    (data,) = load_profile(path, "torch_npu", "job")
    (issue,) = [i for i in data.issues if i.reason == "permission_denied"]
    assert issue.message == "kernel_details.csv: permission denied (Permission denied)"
    assert data.steps and data.kernels is None


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root reads files whatever their mode (tests/profiles/test_hostile_exporter.py drops the capability)"
)
def test_unreadable_file_by_mode(tmp_path: Path) -> None:
    path = build(tmp_path / "r_ascend_pt", PT_LEVEL1)
    (path / OUT / "kernel_details.csv").chmod(0)
    (data,) = load_profile(path, "torch_npu", "job")
    assert "permission_denied" in reasons(data.issues)


def test_two_gigabyte_trace_is_skipped_by_size(tmp_path: Path) -> None:
    path = torch_profile(tmp_path / "r_ascend_pt", steps=[Step(1, 80.0, 0.0, 20.0)], trace=False)
    with open(path / OUT / "trace_view.json", "wb") as f:
        f.truncate(2_000_000_000)  # sparse: costs no disk, and must never be read
    (data,) = load_profile(path, "torch_npu", "job")  # default limit: 1 GiB
    (issue,) = data.issues
    assert issue.reason == "too_large" and issue.message.startswith("trace_view.json: 2000000000 bytes, more than the 1073741824 allowed")
    (summary,) = summarize(data)
    assert summary.compute_ratio == 0.8 and summary.memcpy_ratio is None


def test_huge_csv_over_the_limit(tmp_path: Path) -> None:
    path = torch_profile(
        tmp_path / "r_ascend_pt", steps=[Step(1, 80.0, 0.0, 20.0)], kernels=[Kernel(1, "a", "A", "AI_CORE", 1.0)] * 50, trace=False
    )
    (data,) = load_profile(path, "torch_npu", "job", Limits(max_csv_bytes=1024))
    assert {i.reason for i in data.issues} == {"too_large"}
    assert all("more than the 1024 allowed" in i.message for i in data.issues)


def test_directory_without_any_profile_data(tmp_path: Path) -> None:
    path = tmp_path / "r_ascend_pt"
    write(path / OUT / "analyse.done", "")
    with pytest.raises(ProfileParseError) as err:
        load_profile(path, "torch_npu", "job")
    assert err.value.reason == "no_data" and "r_ascend_pt" in err.value.message
    write(path / OUT / "ascend_pytorch_profiler_0.db", b"SQLite format 3\x00")
    with pytest.raises(ProfileParseError) as err:
        load_profile(path, "torch_npu", "job")
    assert err.value.reason == "unsupported" and "DB export" in err.value.message


def test_copies_without_step_boundaries_are_not_split_by_step(tmp_path: Path) -> None:
    steps = [Step(1, 50.0, 0.0, 50.0), Step(2, 50.0, 0.0, 50.0)]
    path = torch_profile(tmp_path / "r_ascend_pt", steps=steps, copies=[Copy(1.0, 20.0)])
    whole, first, _ = summarize(load_profile(path, "torch_npu", "job")[0], per_step=True)
    assert whole.memcpy_ratio == approx(20.0 / 200.0) and first.memcpy_ratio is None
