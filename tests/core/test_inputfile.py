"""exporter.core.inputfile on real files, FIFOs, devices and symlinks."""

from __future__ import annotations

import io
import os

import pytest

from exporter.core.inputfile import (
    InputRefused,
    bounded_lines,
    decode_utf8,
    open_input,
    read_input,
    read_text_input,
)


def _reason(call) -> str:
    with pytest.raises(InputRefused) as caught:
        call()
    return caught.value.reason


def test_a_regular_file_is_read(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a": 1}')
    assert read_input(path, 100) == b'{"a": 1}'


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _reason(lambda: read_input(fifo, 100)) == "not_regular"
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    assert _reason(lambda: read_input(link, 100)) == "not_regular"


def test_dev_zero_through_a_symlink_is_refused(tmp_path):
    link = tmp_path / "profiler_info_0.json"
    link.symlink_to("/dev/zero")
    assert _reason(lambda: read_input(link, 1 << 20)) == "not_regular"
    # Its real location is outside the watched directory too, checked first.
    assert _reason(lambda: read_input(link, 1 << 20, root=tmp_path)) == "outside_root"


def test_a_symlink_leaving_the_root_is_refused_unless_allowed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    root = tmp_path / "watched"
    root.mkdir()
    (root / "in.txt").symlink_to(outside)
    assert _reason(lambda: read_input(root / "in.txt", 10, root=root)) == "outside_root"
    assert read_input(root / "in.txt", 10) == b"x"  # a caller that allows it names no root


def test_size_cap_and_missing_and_unreadable(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    assert _reason(lambda: read_input(big, 100)) == "too_large"
    assert _reason(lambda: read_input(tmp_path / "nope", 100)) == "not_found"
    if os.geteuid() != 0:
        big.chmod(0)
        assert _reason(lambda: read_input(big, 1000)) == "permission_denied"


def test_open_input_returns_a_blocking_handle(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc\n")
    with open_input(path, 10) as handle:
        assert handle.read() == b"abc\n"


def test_encodings(tmp_path):
    assert decode_utf8("\ufeffkey: 1".encode(), "c.yaml") == "key: 1"
    path = tmp_path / "c.yaml"
    path.write_bytes("key: 1".encode("utf-16"))
    with pytest.raises(InputRefused, match="UTF-16") as caught:
        read_text_input(path, 100)
    assert caught.value.reason == "bad_encoding"
    assert _reason(lambda: decode_utf8(b"\xff\xfe\xfa", "x")) == "bad_encoding"


def test_bounded_lines_holds_at_most_one_capped_line():
    text = io.StringIO("a,b\n" + "x" * 50 + "\n")
    lines = bounded_lines(text, 20, "op.csv")
    assert next(lines) == "a,b\n"
    with pytest.raises(InputRefused) as caught:
        next(lines)
    assert caught.value.reason == "line_too_long"
    assert list(bounded_lines(["ab\n", "cd"], 5)) == ["ab\n", "cd"]


def test_a_path_too_long_to_open_is_named_by_its_head_and_tail(tmp_path):
    long = str(tmp_path / ("d" * 5000))
    with pytest.raises(InputRefused) as caught:
        read_input(long, 100)
    assert caught.value.reason == "unreadable" and len(caught.value.message) < 400
    assert caught.value.message.startswith(str(tmp_path)[:50]) and "characters)" in caught.value.message
