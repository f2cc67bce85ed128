"""exporter.node.gzip_parts: a body compressed part by part is one gzip member any reader takes."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.node.gzip_parts import PartsGzip

FIXTURE_LIKE = [b"# HELP npu_up 1 when the chip answers\n# TYPE npu_up gauge\n", b'npu_up{npu="0"} 1\n' * 500, b"", b"# EOF\n"]


def one_member(data: bytes) -> bytes:
    """Decompress exactly one gzip member; fail if anything follows it."""
    reader = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = reader.decompress(data)
    assert reader.eof and reader.unused_data == b""
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=8), st.integers(min_value=0, max_value=9))
def test_any_parts_make_one_member_equal_to_the_body(parts, level):
    body = b"".join(parts)
    compressed = PartsGzip(level).gzip(parts, body)
    assert one_member(compressed) == body
    assert gzip.decompress(compressed) == body


def test_the_gzip_tool_reads_it():
    tool = shutil.which("gzip")
    if tool is None:
        pytest.fail("the gzip tool is missing (Debian package gzip)")
    body = b"".join(FIXTURE_LIKE)
    compressed = PartsGzip(5).gzip(FIXTURE_LIKE, body)
    assert subprocess.run([tool, "-t"], input=compressed, timeout=30).returncode == 0
    assert subprocess.run([tool, "-dc"], input=compressed, capture_output=True, timeout=30).stdout == body


def test_unchanged_parts_are_not_compressed_again_and_dropped_parts_are_forgotten():
    parts = [b"a" * 1000, b"b" * 1000, b"c" * 1000]
    packer = PartsGzip(5)
    packer.gzip(parts, b"".join(parts))
    packer.gzip(parts, b"".join(parts))
    assert packer.compressed == 3
    changed = [parts[0], b"B" * 1000, parts[2]]
    assert one_member(packer.gzip(changed, b"".join(changed))) == b"".join(changed)
    assert packer.compressed == 4
    packer.gzip(parts, b"".join(parts))  # the old middle part was dropped: compressed again
    assert packer.compressed == 5
