"""Parsers for npu-smi's HCCS (chip-to-chip link) outputs: `-t hccs -i N -c C` and
`-t hccs-bw -i N -c C -time MS`.

`-t hccs` prints each per-link figure as ONE line holding a bracketed list, one value per
link (``hccs tx packets : [12   0   7   ]``); the link is the position in that list. Health
and the first error lane are one value for the chip. 310P prints the counters only. Some
builds print ``xlink`` where others print ``hccs``.

`-t hccs-bw` prints a table: a header line naming ``tx_bandwidth(GB/S)``, one row per link
(index, tx, rx) and a ``total`` row, which is left out (the sum of the links).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from exporter.core.values import is_placeholder, to_float, to_int
from exporter.npusmi.parse.errors import check_output
from exporter.npusmi.parse.keyvalue import Line, garbled, int_value, key_spec, norm, per_chip, resolve_npu_id
from exporter.npusmi.parse.records import ChipHccs, ChipHccsBandwidth, HccsLink

MAX_LINKS = 64  # npu-smi prints at most 8 (DCMI_HCCS_MAX_PCS_NUM); more is not an HCCS list


def _spellings(name: str) -> list[str]:
    return [f"hccs {name}", f"xlink {name}"]


def _list_of(convert: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    def read(value: str) -> tuple[Any, ...]:
        inner = value.strip().removeprefix("[").removesuffix("]")
        return tuple(convert(item) for item in inner.split()[:MAX_LINKS])

    return read


def _lane_list(item: str) -> str | None:
    return item if item and set(item) <= {"0", "1"} else None


# HccsLink field -> its list line.
_LINK_FIELDS = (
    ("lane_mode", _list_of(to_int), "lane mode"),
    ("lane_list", _list_of(_lane_list), "link lane list"),
    ("speed_gbps", _list_of(to_int), "link speed"),
    ("tx_packets", _list_of(to_int), "tx packets"),
    ("tx_bytes", _list_of(to_int), "tx bytes"),
    ("rx_packets", _list_of(to_int), "rx packets"),
    ("rx_bytes", _list_of(to_int), "rx bytes"),
    ("retries", _list_of(to_int), "retry count"),
    ("errors", _list_of(to_int), "error count"),
)
_HCCS_SPEC = key_spec(
    ("healthy", lambda value: None if is_placeholder(value) else value.strip().upper() == "OK", _spellings("health status")),
    ("first_error_lane", int_value, _spellings("first error lane")),
    *((field, convert, _spellings(name)) for field, convert, name in _LINK_FIELDS),
)


def _fields(block: Sequence[Line]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in block:
        if line.key in _HCCS_SPEC:
            field, convert = _HCCS_SPEC[line.key]
            fields.setdefault(field, convert(line.value))
    return fields


def _links(fields: dict[str, Any]) -> tuple[HccsLink, ...]:
    lists = {field: fields[field] for field, _, _ in _LINK_FIELDS if field in fields}
    count = max((len(values) for values in lists.values()), default=0)
    return tuple(
        HccsLink(link, **{field: values[link] if link < len(values) else None for field, values in lists.items()}) for link in range(count)
    )


def parse_hccs(text: str, *, npu_id: int | None = None, chip_id: int | None = None) -> tuple[ChipHccs, ...]:
    """`npu-smi info -t hccs -i N -c C`: pass the queried ids (the `-c` answer prints neither)."""
    npu, chips = per_chip(text, "`-t hccs`", _HCCS_SPEC, npu_id, chip_id)
    records = []
    for chip, block in chips:
        fields = _fields(block)
        records.append(
            ChipHccs(
                npu_id=npu,
                chip_id=chip,
                healthy=fields.get("healthy"),
                first_error_lane=fields.get("first_error_lane"),
                links=_links(fields),
            )
        )
    return tuple(records)


_BW_HEADER = norm("tx_bandwidth(GB/S)")


def parse_hccs_bandwidth(text: str, *, npu_id: int | None = None, chip_id: int = 0) -> ChipHccsBandwidth:
    """`npu-smi info -t hccs-bw -i N -c C -time MS`: GB/s per link, by row position."""
    check_output(text)
    rows = [line.split() for line in text.splitlines()]
    start = next((i for i, words in enumerate(rows) if _BW_HEADER in norm(" ".join(words))), None)
    if start is None:
        raise garbled("`-t hccs-bw`")
    links: list[tuple[int, float, float]] = []
    for words in rows[start + 1 : start + 1 + MAX_LINKS + 1]:
        if len(words) != 3 or words[0].casefold() == "total":
            continue
        tx, rx = to_float(words[1]), to_float(words[2])
        if to_int(words[0]) is not None and tx is not None and rx is not None:
            links.append((len(links), tx, rx))
    return ChipHccsBandwidth(npu_id=resolve_npu_id(None, npu_id), chip_id=chip_id, links=tuple(links))
