"""Property: whatever text hccn_tool (or a broken pipe) hands over, every hccn parser returns
its record type or raises HccnError - nothing else escapes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.hccn.parse import (
    check_exit,
    detect_error,
    parse_bandwidth,
    parse_dev_info,
    parse_ip,
    parse_link,
    parse_link_stat,
    parse_net_health,
    parse_optical,
    parse_speed,
    parse_stat,
)
from exporter.hccn.records import (
    Bandwidth,
    HccnError,
    IpConfig,
    LinkStats,
    LinkStatus,
    NetHealth,
    OpticalInfo,
    PortInfo,
    Speed,
    StatCounters,
)
from tests.support.hccn import FIXTURES

# Every copied sample, all commands and errors: cross-feeding them is part of the test.
SAMPLES = [path.read_bytes().decode("utf-8") for path in sorted(FIXTURES.glob("*.txt"))]

PARSERS = [
    (parse_link, LinkStatus),
    (parse_link_stat, LinkStats),
    (parse_speed, Speed),
    (parse_net_health, NetHealth),
    (parse_stat, StatCounters),
    (parse_optical, OpticalInfo),
    (parse_bandwidth, Bandwidth),
    (parse_ip, IpConfig),
    (parse_dev_info, PortInfo),
]

# Pieces that steer the parsers into their branches: keys, table borders, numbers, units.
TOKENS = st.sampled_from(
    [
        "link status:",
        " UP",
        "DOWN",
        "[devid 0]",
        "link up count       : ",
        "link down count :",
        "Tue Aug  1 14:43:40 2022",
        "    LINK UP",
        "LINK_DOWN",
        "Speed: ",
        "Mb/s",
        "Unknown!",
        " G ",
        "net health status: ",
        "Socket failed",
        "packet statistics:",
        "mac_rx_pfc_pkt_num:",
        "port_id: ",
        "optical info:",
        "present              : ",
        "not present",
        "Tx Power0            : ",
        " mW",
        " dBm",
        "TxPower Lane0(dBm)",
        "Bandwidth TX: ",
        "Bandwidth RX:",
        " MB/sec",
        "ipaddr:",
        "netmask:",
        "| ",
        " |",
        "+-----+",
        "|  0  |",
        "0x",
        "NA",
        "-",
        ":",
        "\n",
        "\r\n",
        "\t",
        " ",
        "9" * 40,
        "1e309",
        "nan",
        "inf",
        "-3.5",
        "0.0001",
        "12",
        "\x00",
        "\ufffd",
        "hccn_tool is busy",
    ]
)
TEXT = st.one_of(
    st.text(max_size=400),
    st.lists(TOKENS, max_size=60).map("".join),
    st.sampled_from(SAMPLES),
    st.tuples(st.sampled_from(SAMPLES), st.integers(0, 4000)).map(lambda s: s[0][: s[1]]),  # cut short
    st.tuples(st.sampled_from(SAMPLES), st.lists(TOKENS, max_size=8).map("".join), st.integers(0, 4000)).map(
        lambda s: s[0][: s[2]] + s[1] + s[0][s[2] :]
    ),
)


def _check(parse, record_type, text: str) -> None:
    try:
        result = parse(text)
    except HccnError as exc:
        assert isinstance(exc.reason, str) and exc.reason
        return
    records = result if isinstance(result, tuple) else (result,)
    assert records and all(isinstance(r, record_type) for r in records)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_only_hccn_error_escapes(text):
    for parse, record_type in PARSERS:
        _check(parse, record_type, text)


@settings(max_examples=200, deadline=None)
@given(st.integers(-300, 300), TEXT)
def test_exit_checks_raise_only_hccn_error(code, text):
    found = detect_error(text)
    assert found is None or isinstance(found, HccnError)
    try:
        check_exit(code, text)
    except HccnError as exc:
        assert code != 0 and exc.code == code


def test_every_sample_through_every_parser():
    for text in SAMPLES:
        for parse, record_type in PARSERS:
            _check(parse, record_type, text)
