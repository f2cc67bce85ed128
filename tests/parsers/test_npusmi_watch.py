"""`npu-smi info watch`: one test per fixture, values read by hand from the text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.parsers.npusmi import NpuSmiError, WatchParser, WatchRow, parse_watch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "npu-smi"
HEADER_9 = "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  AI Cpu(%)   Ctrl Cpu(%) Memory(%)   Memory BW(%)"


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def test_910b_single_npu_nine_columns() -> None:
    rows = parse_watch(load("info-watch-i__910B-likely__unknown__1"))
    assert len(rows) == 31
    assert {(r.npu_id, r.chip_id) for r in rows} == {(2, 0)}
    assert rows[0] == WatchRow(
        npu_id=2, chip_id=0, power_watts=90.1, temperature_celsius=34, aicore_percent=0, aicpu_percent=0,
        ctrlcpu_percent=2, memory_percent=5, memory_bandwidth_percent=0,
    )
    assert (rows[10].power_watts, rows[10].ctrlcpu_percent) == (97.6, 16)
    assert (rows[20].power_watts, rows[21].temperature_celsius) == (100.1, 35)
    assert (rows[-1].power_watts, rows[-1].ctrlcpu_percent) == (90.2, 0)
    assert rows[0].npu_util_percent is None and rows[0].aicube_percent is None  # not printed


def test_310b_devboard_with_short_last_row() -> None:
    rows = parse_watch(load("info-watch__310B-devboard__unknown__1"))
    assert len(rows) == 12
    assert rows[0] == WatchRow(
        npu_id=0, chip_id=0, power_watts=8.7, temperature_celsius=55, aicore_percent=0, aicpu_percent=2,
        ctrlcpu_percent=64, memory_percent=71, memory_bandwidth_percent=7,
    )
    assert (rows[1].temperature_celsius, rows[1].aicore_percent, rows[1].ctrlcpu_percent) == (56, 25, 67)
    assert rows[-1] == WatchRow(
        npu_id=0, chip_id=0, power_watts=8.7, temperature_celsius=55, aicore_percent=23, aicpu_percent=3,
        ctrlcpu_percent=62, memory_percent=71, memory_bandwidth_percent=6,
    )


def test_950_no_chip_column_with_npu_util_and_aicube() -> None:
    rows = parse_watch(load("info-watch__950-Atlas350-doc__unknown__1"))
    assert [r.npu_id for r in rows] == list(range(8))
    assert {r.chip_id for r in rows} == {None}
    assert rows[0] == WatchRow(
        npu_id=0, chip_id=None, power_watts=290.4, temperature_celsius=51, aicore_percent=0, aicpu_percent=0,
        ctrlcpu_percent=16, memory_percent=3, memory_bandwidth_percent=0, npu_util_percent=0, aicube_percent=0,
    )
    assert (rows[-1].power_watts, rows[-1].temperature_celsius, rows[-1].ctrlcpu_percent) == (289.3, 51, 14)
    assert (rows[-1].npu_util_percent, rows[-1].aicube_percent) == (0, 0)


def test_950_selected_columns_power_and_temp() -> None:
    rows = parse_watch(load("info-watch-i-d-s__950-Atlas350-doc__unknown__1"))  # -s pt
    assert rows == (
        WatchRow(npu_id=0, chip_id=None, power_watts=280.8, temperature_celsius=84),
        WatchRow(npu_id=0, chip_id=None, power_watts=280.9, temperature_celsius=84),
        WatchRow(npu_id=0, chip_id=None, power_watts=280.8, temperature_celsius=83),
    )


def test_feed_header_blank_and_placeholders() -> None:
    parser = WatchParser()
    assert parser.columns is None
    assert parser.feed(HEADER_9) is None
    assert parser.columns is not None and parser.columns[4] == "AI Core(%)" and len(parser.columns) == 9
    assert parser.feed("") is None and parser.feed("   ") is None
    second_die = parser.feed("0           1           -           37          0           0           1           5           0           ")
    assert second_die is not None and (second_die.chip_id, second_die.power_watts) == (1, None)
    p310 = parser.feed("1792        0           NA          36          0           0           3           4           1           ")
    assert p310 is not None and (p310.npu_id, p310.power_watts, p310.temperature_celsius) == (1792, None, 36)


def test_feed_new_header_changes_columns_and_unknown_columns_are_counted() -> None:
    parser = WatchParser()
    parser.feed(HEADER_9)
    parser.feed("NpuID(Idx)  ChipId(Idx) AI Vector(%) Temp(C)     ")
    row = parser.feed("3           1           42          55          ")
    assert row == WatchRow(npu_id=3, chip_id=1, temperature_celsius=55)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("2           0           90.1        34", "truncated"),
        ("2           0           90.1        34          0 0 2 5 0 9", "garbled"),
        ("2           x           90.1        34          0           0           2           5           0", "garbled"),
    ],
)
def test_feed_rejects_rows_that_do_not_fit(line: str, reason: str) -> None:
    parser = WatchParser()
    parser.feed(HEADER_9)
    with pytest.raises(NpuSmiError) as error:
        parser.feed(line)
    assert error.value.reason == reason


def test_data_before_header() -> None:
    with pytest.raises(NpuSmiError) as error:
        WatchParser().feed("2           0           90.1        34")
    assert error.value.reason == "garbled"


def test_npu_smi_error_in_stream() -> None:
    parser = WatchParser()
    lines = load("error-dcmi-init-8005__container__unknown__1").splitlines()
    assert parser.feed(lines[0]) is None  # "DrvMngGetConsoleLogLevel failed. ..." alone says nothing
    with pytest.raises(NpuSmiError) as error:
        parser.feed(lines[1])
    assert (error.value.reason, error.value.code) == ("dcmi_init_failed", -8005)


@pytest.mark.parametrize("text", ["", "hello\n", "(base) root@davinci-mini:~# npu-smi info watch\n"])
def test_parse_watch_without_header(text: str) -> None:
    with pytest.raises(NpuSmiError) as error:
        parse_watch(text)
    assert error.value.reason == "garbled"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=60) | st.sampled_from([HEADER_9, "0 0 1 2 3 4 5 6 7", "0 0 NA - x"]), max_size=6))
def test_feed_never_crashes(lines: list[str]) -> None:
    parser = WatchParser()
    for line in lines:
        try:
            row = parser.feed(line)
        except NpuSmiError:
            continue
        assert row is None or isinstance(row, WatchRow)
