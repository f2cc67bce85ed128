"""Parser for `npu-smi info watch` (streaming, one header then rows)."""

from __future__ import annotations

from exporter.parsers.npusmi.records import NpuSmiError, WatchRow


class WatchParser:
    def feed(self, line: str) -> WatchRow | None:
        raise NpuSmiError("garbled", "WatchParser not implemented yet")


def parse_watch(text: str) -> tuple[WatchRow, ...]:
    parser = WatchParser()
    return tuple(row for row in map(parser.feed, text.splitlines()) if row is not None)
