"""Gzip of a body joined from parts, each part compressed once.

A /metrics body is the join of parts that change at different rates: the chips every few
seconds, the training jobs at every step, the web server's own counters at every request.
Compressing the whole body again whenever any part changed costs as much as the body (tens of
milliseconds for a large node) for a change of a few kilobytes. Here each part is compressed on
its own into a deflate chunk that ends on a byte boundary without ending the stream (a sync
flush, as pigz does for its blocks); chunks made that way can follow one another in one
deflate stream, because none refers back past its own start. A body is then one ordinary gzip
member: header, the parts' chunks, an empty final block, and the CRC-32 and length of the whole
body. Any gzip reader takes it; only the parts that changed are compressed again.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

# Magic, deflate, no flags, no time, no extra flags, OS unknown (RFC 1952, section 2.3).
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# The last block of the stream: final, fixed Huffman codes, nothing but end-of-block.
_FINAL_BLOCK = b"\x03\x00"


def deflate_chunk(data: bytes, level: int) -> bytes:
    """``data`` as raw deflate blocks that end byte-aligned and leave the stream open."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


class PartsGzip:
    """Gzips bodies made of parts, keeping each part's chunk while that part object is served."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.compressed = 0  # parts compressed so far (tests count them)
        self._chunks: dict[int, tuple[bytes, bytes]] = {}  # id(part) -> (part, its chunk)

    def gzip(self, parts: Sequence[bytes], body: bytes) -> bytes:
        """The gzip of ``body``, which is ``b"".join(parts)``."""
        chunks: dict[int, tuple[bytes, bytes]] = {}
        for part in parts:
            if not part:
                continue
            kept = self._chunks.get(id(part))
            if kept is None or kept[0] is not part:
                kept = (part, deflate_chunk(part, self.level))
                self.compressed += 1
            chunks[id(part)] = kept
        self._chunks = chunks  # chunks of parts no longer served go with them
        trailer = struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF)
        return b"".join((_HEADER, *(chunks[id(part)][1] for part in parts if part), _FINAL_BLOCK, trailer))
