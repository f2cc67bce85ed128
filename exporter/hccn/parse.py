"""Pure parsers for hccn_tool text: text in, typed frozen records out (records.py).

Two builds print the formats described in docs/formats/hccn_tool.md: 910B/A3
(`hccn_tool -i N -<cmd> -g`) and 950/A5 (`hccn_tool -g -<cmd> -i N -u U -p P`, tables and
`key: value` with a space).

hccn_tool prints some errors on stdout with a non-zero exit and its exit codes collide
(13 = no IP preset OR unsupported product), so errors are told apart by their text
(:func:`detect_error`, :func:`check_exit`). The only exception any parser raises is
:class:`HccnError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from exporter.core.text import find_message, table_cells
from exporter.core.values import NUMBER_PATTERN, leading_float, to_float
from exporter.hccn.records import (
    NET_HEALTH_STATES,
    Bandwidth,
    HccnError,
    IpConfig,
    LinkRecord,
    LinkStats,
    LinkStatus,
    NetHealth,
    OpticalInfo,
    OpticalLane,
    PortInfo,
    Speed,
    StatCounters,
)

# --- errors -----------------------------------------------------------------------------

# hccn_tool's fixed messages (g_uda_dsmi_err_list and friends), first match wins. Matched
# case-folded as substrings: the stream (stdout/stderr) and exit code are not reliable.
_MESSAGES: tuple[tuple[str, str], ...] = (
    ("hccn_tool is busy", "busy"),
    ("permission denied", "permission_denied"),
    ("only root user is legal", "permission_denied"),
    ("not supported on this product", "not_supported"),
    ("not supported on this optical media", "not_supported"),
    ("unsupported on this optical module", "not_supported"),
    ("does not support optical cmd", "not_supported"),
    ("optical module is not present", "optical_not_present"),
    ("optical module initializing", "optical_initializing"),
    ("get invalid device id", "invalid_device_id"),
    ("the device is not exist", "no_device"),
    ("get device health status failed", "device_unhealthy"),
    ("no ip was preset", "no_ip"),
    ("link status is down", "link_down"),
    ("control link unreachable", "control_link_unreachable"),
    ("get unknown option", "bad_option"),
    ("cmd line execute timeout", "timeout"),
    ("command execute failed", "command_failed"),
    ("cmd execute failed", "command_failed"),
)


def detect_error(text: str) -> HccnError | None:
    """The error hccn_tool reported in ``text``, or None when it reads as a normal output."""
    found = find_message(text, _MESSAGES, casefold=True)
    return None if found is None else HccnError(*found)


def check_exit(returncode: int, output: str) -> None:
    """Raise the error of a failed call: by message text first, since exit codes collide."""
    if returncode == 0:
        return
    error = detect_error(output) or HccnError("exit_status", f"hccn_tool exited with status {returncode}")
    error.code = returncode
    raise error


def _garbled(text: str, what: str) -> HccnError:
    """The reported error if the text is one, else 'garbled'."""
    return detect_error(text) or HccnError("garbled", f"no {what} in hccn_tool output")


# --- values -------------------------------------------------------------------------------

_INT_RE = re.compile(r"[0-9]{1,30}", re.ASCII)


def _float(text: str) -> float | None:
    """The leading number of ``47 C`` / ``3262.90 mV`` / ``1.0189 mW``; None for NA etc."""
    return leading_float(text)


def _hex(text: str) -> int | None:
    match = re.fullmatch(r"0x([0-9a-fA-F]{1,16})", text.strip())
    return int(match.group(1), 16) if match else None


def dbm_to_mw(dbm: float) -> float:
    """Optical power: P[mW] = 10 ** (P[dBm] / 10)."""
    return math.pow(10.0, dbm / 10.0)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _cells(line: str) -> list[str] | None:
    """Stripped cells of an ASCII table row ``| a | b |``; None for separators and other lines."""
    cells = table_cells(line)
    return None if cells is None else [cell.strip() for cell in cells]


def _table_rows(text: str) -> list[list[str]]:
    """Data rows of the first table: rows after the header row, until the table closes."""
    rows: list[list[str]] = []
    header_seen = False
    separators = 0
    for line in _lines(text):
        if line.startswith(("+-", "+=")):
            separators += 1
            if separators >= 3:
                break
            continue
        cells = _cells(line)
        if cells is None:
            continue
        if not header_seen:
            header_seen = True
            continue
        rows.append(cells)
    return rows


# --- -link -g -----------------------------------------------------------------------------

_LINK_RE = re.compile(r"^\s*link status\s*:\s*(UP|DOWN)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_link(text: str) -> LinkStatus:
    """``link status: UP`` -> LinkStatus(up=True). Several status lines are not one call."""
    found = _LINK_RE.findall(text)
    if len(found) != 1:
        raise _garbled(text, "single 'link status' line")
    return LinkStatus(up=found[0].upper() == "UP")


# --- -link_stat -g ------------------------------------------------------------------------

_UP_COUNT_RE = re.compile(r"link up count\s*:\s*([0-9]{1,30})\s*$", re.IGNORECASE | re.MULTILINE)
_DOWN_COUNT_RE = re.compile(r"link down count\s*:\s*([0-9]{1,30})\s*$", re.IGNORECASE | re.MULTILINE)
_CURRENT_RE = re.compile(r"current time\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_ASCTIME = r"\w{3} \w{3} +\d{1,2} \d{1,2}:\d\d:\d\d \d{4}"
# 910B: "[devid 0]    Tue Aug  1 14:43:40 2022    LINK UP" (prefix varies: [devid N] / [device N])
_RECORD_RE = re.compile(rf"\]\s+({_ASCTIME})\s+(LINK[ _](?:UP|DOWN))\s*$", re.IGNORECASE)


def parse_link_stat(text: str) -> LinkStats:
    """910B ``[devid N]link up count : 2`` lines or the A5 counters + record table."""
    up = _UP_COUNT_RE.search(text)
    if up is None:
        raise _garbled(text, "'link up count'")
    down = _DOWN_COUNT_RE.search(text)
    current = _CURRENT_RE.search(text)
    records = []
    for line in _lines(text):
        match = _RECORD_RE.search(line)
        if match:
            records.append(LinkRecord(" ".join(match.group(1).split()), match.group(2).upper().endswith("UP")))
            continue
        record = _a5_record(line)
        if record is not None:
            records.append(record)
    return LinkStats(
        up_count=int(up.group(1)),
        down_count=int(down.group(1)) if down else None,
        records=tuple(records),
        current_time=current.group(1) if current else None,
    )


def _a5_record(line: str) -> LinkRecord | None:
    """``|  0  |  0   |  4   |  LINK_UP    | Mon Feb 9 21:45:51 2026 |``"""
    cells = _cells(line)
    if not cells or len(cells) < 2:
        return None
    status = next((c.upper() for c in cells if c.upper() in ("LINK_UP", "LINK_DOWN", "LINK UP", "LINK DOWN")), None)
    stamp = next((c for c in cells if re.fullmatch(_ASCTIME, c)), None)
    if status is None or stamp is None:
        return None
    return LinkRecord(" ".join(stamp.split()), status.endswith("UP"))


# --- -speed -g ----------------------------------------------------------------------------

_SPEED_RE = re.compile(r"^\s*Speed\s*:\s*(?:([0-9]{1,30})\s*Mb/s|(Unknown!?))\s*$", re.IGNORECASE | re.MULTILINE)
_A5_SPEED_RE = re.compile(r"^([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*G(?:b/?s|bps)?$", re.IGNORECASE)


def parse_speed(text: str) -> Speed:
    """910B ``Speed: 200000 Mb/s`` | ``Speed: Unknown!``; A5 table (first data row, column Speed)."""
    match = _SPEED_RE.search(text)
    if match:
        return Speed(None if match.group(2) else float(match.group(1)))
    for cells in _table_rows(text):
        if len(cells) >= 4:
            cell = cells[3]
            if cell.upper() in ("NA", "N/A", "-", "UNKNOWN"):
                return Speed(None)
            value = _A5_SPEED_RE.match(cell)
            if value:
                return Speed(float(value.group(1)) * 1000.0)
    raise _garbled(text, "speed")


# --- -net_health -g -----------------------------------------------------------------------

_HEALTH_RE = re.compile(r"^\s*net health status\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)


def parse_net_health(text: str) -> NetHealth:
    found = _HEALTH_RE.findall(text)
    if len(found) != 1 or not found[0]:
        raise _garbled(text, "single 'net health status' line")
    return NetHealth(normalise_net_health(found[0]), found[0])


def normalise_net_health(printed: str) -> str:
    """The g_net_health_status entry ``printed`` names ("Socket failed" -> "Socket fail")."""
    folded = " ".join(printed.split()).casefold()
    for state in NET_HEALTH_STATES:
        if folded.startswith(state.casefold()):
            return state
    return "Unknown"


# --- -stat -g -----------------------------------------------------------------------------

_STAT_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]{0,80})\s*:\s*([0-9]{1,30})$")


def parse_stat(text: str) -> StatCounters:
    """910B ``key:value`` (no space), A5 ``key: value``. Unknown keys kept; other lines skipped."""
    counters: dict[str, int] = {}
    for line in _lines(text):
        match = _STAT_RE.match(line)
        if match:
            counters[match.group(1)] = int(match.group(2))
    if not counters:
        raise _garbled(text, "counters")
    return StatCounters(tuple(counters.items()))


# --- -optical -g --------------------------------------------------------------------------

_LANE_KEY_RE = re.compile(r"^(tx power|rx power|tx bias)\s*([0-9])$")
_A5_LANE_RE = re.compile(r"^(tx ?power|rx ?power|bias)\s*lane\s*([0-9])\s*\((dbm|mw|ma)\)$")
_NOT_PRESENT_RE = re.compile(r"optical module is not present", re.IGNORECASE)

# key (lower case, spaces collapsed) -> OpticalInfo field
_OPTICAL_FLOATS = {
    "temperature": "temperature_celsius",
    "vcc": "vcc_mv",
    "temp high thres": "temperature_high_celsius",
    "temp low thres": "temperature_low_celsius",
    "vcc high thres": "vcc_high_mv",
    "vcc low thres": "vcc_low_mv",
    "txpower high thres": "tx_power_high_mw",
    "txpower low thres": "tx_power_low_mw",
    "rxpower high thres": "rx_power_high_mw",
    "rxpower low thres": "rx_power_low_mw",
}
_OPTICAL_TEXTS = {
    "vendor name": "vendor_name",
    "vendor part number": "part_number",
    "xsfp identifier": "identifier",
}


def parse_optical(text: str) -> OpticalInfo:
    """910B ``key : value`` block, A5 monitoring table, or ``Optical module is not present.``"""
    if _NOT_PRESENT_RE.search(text):
        return OpticalInfo(present=False)
    if "|" in text and "power" in text.casefold():
        return _parse_optical_a5(text)
    numbers: dict[str, float | None] = {}  # by OpticalInfo field
    texts: dict[str, str | None] = {}
    flags: dict[str, int | None] = {}
    lanes: dict[int, dict[str, float | None]] = {}
    present: bool | None = None
    seen = False
    for line in _lines(text):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = " ".join(key.split()).casefold()
        value = value.strip()
        if key == "present":
            seen = True
            present = {"present": True, "not present": False}.get(value.casefold())
        elif key in _OPTICAL_FLOATS:
            seen = True
            numbers[_OPTICAL_FLOATS[key]] = _float(value)
        elif key in _OPTICAL_TEXTS:
            texts[_OPTICAL_TEXTS[key]] = value if value and value.upper() != "NA" else None
        elif key in ("tx los flag", "rx los flag"):
            flags[key.split()[0]] = _hex(value)
        else:
            lane = _LANE_KEY_RE.match(key)
            if lane:  # lane-less "Tx Power : NA" (absent module) is ignored on purpose
                name = {"tx power": "tx_power_mw", "rx power": "rx_power_mw", "tx bias": "tx_bias_ma"}[lane.group(1)]
                lanes.setdefault(int(lane.group(2)), {})[name] = _float(value)
    if not seen:
        raise _garbled(text, "optical info")
    return OpticalInfo(
        present=present,
        temperature_celsius=numbers.get("temperature_celsius"),
        vcc_mv=numbers.get("vcc_mv"),
        lanes=_lanes(lanes),
        temperature_high_celsius=numbers.get("temperature_high_celsius"),
        temperature_low_celsius=numbers.get("temperature_low_celsius"),
        vcc_high_mv=numbers.get("vcc_high_mv"),
        vcc_low_mv=numbers.get("vcc_low_mv"),
        tx_power_high_mw=numbers.get("tx_power_high_mw"),
        tx_power_low_mw=numbers.get("tx_power_low_mw"),
        rx_power_high_mw=numbers.get("rx_power_high_mw"),
        rx_power_low_mw=numbers.get("rx_power_low_mw"),
        tx_los_flags=flags.get("tx"),
        rx_los_flags=flags.get("rx"),
        vendor_name=texts.get("vendor_name"),
        part_number=texts.get("part_number"),
        identifier=texts.get("identifier"),
    )


def _lanes(lanes: dict[int, dict[str, float | None]]) -> tuple[tuple[int, OpticalLane], ...]:
    """(lane index, readings) in lane order, from the readings by OpticalLane field."""
    return tuple(
        (index, OpticalLane(values.get("tx_power_mw"), values.get("rx_power_mw"), values.get("tx_bias_ma")))
        for index, values in sorted(lanes.items())
    )


def _parse_optical_a5(text: str) -> OpticalInfo:
    """A5 tables: rows carry a ``TxPower Lane0(dBm)``-style item followed by its value.

    No public A5 capture exists; this follows Huawei's exporter (a row's item cell, then the
    value cell; ``-`` or NA for no reading) and converts dBm to mW.
    """
    lanes: dict[int, dict[str, float | None]] = {}
    for line in _lines(text):
        cells = _cells(line)
        if not cells:
            continue
        for index, cell in enumerate(cells[:-1]):
            match = _A5_LANE_RE.match(" ".join(cell.split()).casefold())
            if not match:
                continue
            value = _float(cells[index + 1])
            kind, lane, unit = match.group(1).replace(" ", ""), int(match.group(2)), match.group(3)
            if kind == "bias":
                lanes.setdefault(lane, {})["tx_bias_ma"] = value
            else:
                mw = None if value is None else (dbm_to_mw(value) if unit == "dbm" else value)
                lanes.setdefault(lane, {})[f"{kind[:2]}_power_mw"] = mw
            break
    if not lanes:
        raise _garbled(text, "optical power rows")
    return OpticalInfo(present=True, lanes=_lanes(lanes))


# --- -bandwidth -g ------------------------------------------------------------------------

# Anchored at line start so `-peak_bw` ("Peak Bandwidth TX") never reads as a bandwidth.
_BANDWIDTH_RE = re.compile(rf"^\s*Bandwidth (TX|RX)\s*:\s*({NUMBER_PATTERN})\s*MB/sec\s*$", re.MULTILINE)


def parse_bandwidth(text: str) -> Bandwidth:
    """``Bandwidth TX:     0.00 MB/sec`` and the RX line (the first pair on A5 bond outputs)."""
    values: dict[str, float] = {}
    for direction, number in _BANDWIDTH_RE.findall(text):
        reading = to_float(number)
        if reading is not None:
            values.setdefault(direction, reading)
    if set(values) != {"TX", "RX"}:
        raise _garbled(text, "'Bandwidth TX/RX' lines")
    return Bandwidth(tx_mb_per_second=values["TX"], rx_mb_per_second=values["RX"])


# --- -ip -g -------------------------------------------------------------------------------

_IP_RE = re.compile(r"^(?:vnic )?(ipaddr|netmask)\s*:\s*(\S{1,64})$", re.IGNORECASE)


def parse_ip(text: str) -> tuple[IpConfig, ...]:
    """``ipaddr:x`` / ``netmask:y`` pairs in order (910B; also the A5 ``vnic ...`` lines)."""
    out: list[IpConfig] = []
    address: str | None = None
    for line in _lines(text):
        match = _IP_RE.match(line)
        if not match:
            continue
        key, value = match.group(1).lower(), match.group(2)
        if key == "ipaddr":
            if address is not None:
                out.append(IpConfig(address, None))
            address = value
        elif address is not None:
            out.append(IpConfig(address, value))
            address = None
    if address is not None:
        out.append(IpConfig(address, None))
    if not out:
        raise _garbled(text, "'ipaddr' line")
    return tuple(out)


# --- A5 -dev_info -g ----------------------------------------------------------------------


def parse_dev_info(text: str) -> tuple[PortInfo, ...]:
    """The ports of an A5 chip: first table, columns UDie, Port, Speed, Type, Link, Media."""
    ports = []
    for cells in _table_rows(text):
        if len(cells) < 5 or not (_INT_RE.fullmatch(cells[0]) and _INT_RE.fullmatch(cells[1])):
            continue
        speed = cells[2]
        ports.append(
            PortInfo(
                udie=int(cells[0]),
                port=int(cells[1]),
                speed_gbps=int(speed) if _INT_RE.fullmatch(speed) else None,
                port_type=cells[3],
                link_up={"UP": True, "DOWN": False}.get(cells[4].upper()),
                media=cells[5] if len(cells) > 5 and cells[5] else None,
            )
        )
    if not ports:
        raise _garbled(text, "port table")
    return tuple(ports)


# command -> parser of its output (the commands the hccn source runs, plus A5 port discovery)
PARSERS: Mapping[str, Callable[[str], object]] = {
    "link": parse_link,
    "link_stat": parse_link_stat,
    "speed": parse_speed,
    "net_health": parse_net_health,
    "stat": parse_stat,
    "optical": parse_optical,
    "bandwidth": parse_bandwidth,
    "ip": parse_ip,
    "dev_info": parse_dev_info,
}
