"""Pure hccn_tool parsers on every copied sample (tests/fixtures/hccn), values read by hand.

`__mangled` samples (hand-edited by their publishers) get no value test of their own except
where the edit is known and harmless; the property test feeds them to every parser.
"""

from __future__ import annotations

import math

import pytest

from exporter.hccn.parse import (
    check_exit,
    dbm_to_mw,
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
    LinkRecord,
    LinkStats,
    PortInfo,
    Speed,
)
from tests.support.hccn import FIXTURES, fixture


def test_every_copied_sample_has_its_provenance():
    for sample in FIXTURES.glob("*.txt"):
        assert sample.with_suffix(".src").exists(), sample.name


# --- -link -g -------------------------------------------------------------------------------


def test_link_up_and_down():
    assert parse_link(fixture("link__unknown__1")).up is True
    assert parse_link(fixture("link__950-A5__1")).up is False  # A5 prints the same line


def test_link_tolerates_trailing_space_and_crlf():
    assert parse_link("link status: UP \r\n").up is True


def test_link_with_several_status_lines_is_not_one_call():
    with pytest.raises(HccnError) as info:
        parse_link(fixture("link__910B3__1__mangled"))  # an 8-NPU loop, elided
    assert info.value.reason == "garbled"


# --- -link_stat -g --------------------------------------------------------------------------


def test_link_stat_old_driver_has_no_down_count():
    stats = parse_link_stat(fixture("link_stat__910A__1"))
    assert stats == LinkStats(
        up_count=2,
        down_count=None,
        records=(
            LinkRecord("Tue Aug 1 14:43:40 2022", True),
            LinkRecord("Tue Aug 1 14:43:40 2022", False),
            LinkRecord("Tue Aug 1 14:43:26 2022", True),
        ),
        current_time="Wed Aug  2 03:09:26 2022",
    )


def test_link_stat_device_prefix_variant():
    stats = parse_link_stat(fixture("link_stat__unknown__1"))  # "[device 0]" instead of "[devid 0]"
    assert (stats.up_count, stats.down_count, len(stats.records)) == (2, None, 3)
    assert stats.records[1] == LinkRecord("Tue Jun 6 16:32:10 2023", False)
    assert stats.current_time == "Wed Jun  7 10:08:28 2023"


def test_link_stat_new_driver_counts_downs():
    stats = parse_link_stat(fixture("link_stat__unknown__3"))
    assert (stats.up_count, stats.down_count) == (2, 1)
    assert [r.up for r in stats.records] == [True, False, True]
    assert stats.records[0].timestamp == "Sun Oct 5 10:13:51 2025"


def test_link_stat_a5_table():
    stats = parse_link_stat(fixture("link_stat__950-A5__1"))
    assert (stats.up_count, stats.down_count, stats.current_time) == (2, 2, None)
    assert stats.records == (
        LinkRecord("Mon Feb 9 21:45:51 2026", True),
        LinkRecord("Mon Feb 9 21:45:47 2026", False),
        LinkRecord("Mon Feb 9 21:43:04 2026", True),
        LinkRecord("Mon Feb 9 21:42:59 2026", False),
    )


# --- -speed -g ------------------------------------------------------------------------------


def test_speed_910b_and_unknown():
    # No verbatim 910B capture is public: these are the printf formats of tool_ext.c.
    assert parse_speed("Speed: 200000 Mb/s\n") == Speed(200000.0)
    assert parse_speed("Speed: Unknown!\n") == Speed(None)


def test_speed_a5_table_is_in_gigabits():
    assert parse_speed(fixture("speed__950-A5__1")) == Speed(400_000.0)


def test_speed_a5_na_row_is_absent():
    text = fixture("speed__950-A5__1").replace("| 400 G   |", "| NA      |")
    assert parse_speed(text) == Speed(None)


# --- -net_health -g -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,status",
    [
        ("net_health__unknown__1", "Init"),
        ("net_health__unknown__2", "Fault"),
        ("net_health__unknown__3", "Success"),
        ("net_health__910A__1", "Socket fail"),  # printed "Socket failed" (older driver)
    ],
)
def test_net_health(name, status):
    health = parse_net_health(fixture(name))
    assert health.status == status
    assert health.printed == fixture(name).split(": ", 1)[1].strip()


def test_net_health_unlisted_text_is_unknown_state():
    assert parse_net_health("net health status: Something new\n").status == "Unknown"


# --- -stat -g -------------------------------------------------------------------------------


def test_stat_a5_key_space_value():
    counters = parse_stat(fixture("stat__950-A5__1")).as_dict()
    assert len(counters) == 42
    assert counters["port_id"] == 4 and counters["is_uboe_port"] == 0
    assert counters["crc_error_sum"] == 0 and counters["ub_glb_ipv4_pkt_cnt_tx"] == 0
    assert list(counters)[-1] == "crc_error_sum"


def test_stat_910b_no_space_and_elided_lines_skipped():
    counters = parse_stat(fixture("stat__unknown__1__mangled")).as_dict()
    assert counters["nic_rx_all_oct_num"] == 482237805
    assert counters["nic_tx_all_pkg_num"] == 122404
    assert "..." not in counters


# --- -optical -g ----------------------------------------------------------------------------


def test_optical_910_block():
    # The sample is mangled in one known way: "present : not present" was edited in while
    # the module's readings stayed. Everything else follows the printf formats.
    info = parse_optical(fixture("optical__910A__1__mangled"))
    assert info.present is False
    assert info.temperature_celsius == 47
    assert info.vcc_mv == 3262.90
    assert info.lane(0).tx_power_mw == 4.4035 and info.lane(0).rx_power_mw == 1.0189
    assert info.lane(1).rx_power_mw == 0.0054 and info.lane(3).tx_bias_ma == 7.9240
    assert (info.rx_power_low_mw, info.tx_power_high_mw) == (0.1445, 3.5481)
    assert (info.temperature_high_celsius, info.vcc_low_mv) == (70, 3135.00)
    assert (info.tx_los_flags, info.rx_los_flags) == (0, 0xFF)
    assert (info.vendor_name, info.identifier) == ("Hisense", "QSFP+ or later")


def test_optical_na_readings_are_absent():
    text = (
        "optical info:\npresent              : present\ntemperature          : not supported\n"
        "Vcc                  : 3300.00 mV\nTx Power0            : 1.0000 mW\nRx Power0            : 0.5000 mW\n"
        "Tx Power2            : NA\nRx Power2            : NA\n"
    )
    info = parse_optical(text)
    assert info.present is True and info.temperature_celsius is None
    assert info.lane(2).tx_power_mw is None and info.lane(0).rx_power_mw == 0.5


def test_optical_absent_module_block_and_message():
    absent = (
        "optical info:\npresent              : not present\ntemperature          : NA\n"
        "Vcc                  : NA\nTx Power             : NA\nRx Power             : NA\n"
    )
    info = parse_optical(absent)
    assert info.present is False and info.lanes == () and info.vcc_mv is None
    # The dsmi error path: stdout, exit 20. It is a reading, not a parse error.
    assert parse_optical("Optical module is not present.\n").present is False


def test_optical_a5_table_converts_dbm():
    # No public A5 capture exists: rows shaped as Huawei's exporter reads them (item, value).
    text = (
        "+-----+---------+----------------------+--------+\n"
        "| NPU | Optical | Items                | Value  |\n"
        "+-----+---------+----------------------+--------+\n"
        "| 0   | 0       | TxPower Lane0(dBm)   | 0.00   |\n"
        "| 0   | 0       | RxPower Lane0(dBm)   | -3.01  |\n"
        "| 0   | 0       | RxPower Lane1(dBm)   | -      |\n"
        "| 0   | 0       | Bias Lane0(mA)       | 7.50   |\n"
        "+-----+---------+----------------------+--------+\n"
    )
    info = parse_optical(text)
    assert info.present is True
    assert info.lane(0).tx_power_mw == pytest.approx(1.0)
    assert info.lane(0).rx_power_mw == pytest.approx(0.5, rel=1e-3)
    assert info.lane(1).rx_power_mw is None
    assert info.lane(0).tx_bias_ma == 7.5


def test_dbm_to_mw():
    assert dbm_to_mw(0) == 1.0
    assert dbm_to_mw(10) == pytest.approx(10.0)
    assert dbm_to_mw(-30) == pytest.approx(0.001)
    assert math.isclose(dbm_to_mw(-3.0103), 0.5, rel_tol=1e-4)


# --- -bandwidth -g --------------------------------------------------------------------------


def test_bandwidth_a5():
    assert parse_bandwidth(fixture("bandwidth__950-A5__1")) == Bandwidth(tx_mb_per_second=0.0, rx_mb_per_second=266.84)


def test_bandwidth_910b_format():
    # tool_ops_ext.c: "Bandwidth TX: %5u.%02u MB/sec"
    text = "Bandwidth TX:  1234.05 MB/sec\nBandwidth RX:     0.00 MB/sec\n"
    assert parse_bandwidth(text) == Bandwidth(1234.05, 0.0)


def test_peak_bandwidth_is_not_a_bandwidth():
    with pytest.raises(HccnError) as info:
        parse_bandwidth(fixture("peak_bw__950-A5__1"))
    assert info.value.reason == "garbled"


# --- -ip -g ---------------------------------------------------------------------------------


def test_ip_one_port():
    assert parse_ip(fixture("ip__910A__1")) == (IpConfig("192.161.200.10", "255.255.255.0"),)
    assert parse_ip(fixture("ip__910B1__1")) == (IpConfig("29.1.112.213", "255.255.0.0"),)


def test_ip_concatenated_outputs_in_order():
    found = parse_ip(fixture("ip__910B3__1"))
    assert [c.address for c in found] == [f"11.12.165.{n}" for n in range(80, 88)]
    assert {c.netmask for c in found} == {"255.255.255.0"}


def test_ip_not_preset_is_an_error_with_its_reason():
    with pytest.raises(HccnError) as info:
        parse_ip(fixture("error-ip-not-preset__unknown__1"))
    assert info.value.reason == "no_ip"


# --- A5 -dev_info -g ------------------------------------------------------------------------


def test_dev_info_first_table_only():
    ports = parse_dev_info(fixture("dev_info__950-A5__1"))
    assert ports == tuple(PortInfo(0, port, 400, "UB", True, "Electrical") for port in (4, 5, 6))


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,code,reason",
    [
        ("hccn_tool is busy, please try again.\n", 11, "busy"),
        ("permission denied: pls check this cmd run permission.\n", 12, "permission_denied"),
        ("The command is not supported on this product.\n", 13, "not_supported"),
        ("Get ipconf failed, because no ip was preset there!\n", 13, "no_ip"),  # same exit code, other meaning
        ("Optical module is not present.\n", 20, "optical_not_present"),
        ("The system is in optical module initializing, please try again later.\n", 18, "optical_initializing"),
        ("Get device health status failed!\n", 3, "device_unhealthy"),
        ("The device is not exist!\n", 4, "no_device"),
        ("Get invalid device id.\n", 4, "invalid_device_id"),
        ("Execute failed: Link status is down.\n", 22, "link_down"),
        ("Control link unreachable.\n", 15, "control_link_unreachable"),
        ("Get unknown option!\nUsage: ...\n", 3, "bad_option"),
        ("Command execute failed!\n", 1, "command_failed"),
        ("something else\n", 7, "exit_status"),
    ],
)
def test_check_exit_tells_errors_apart_by_text(text, code, reason):
    with pytest.raises(HccnError) as info:
        check_exit(code, text)
    assert (info.value.reason, info.value.code) == (reason, code)


def test_check_exit_zero_is_fine_and_errors_on_stdout_are_found_by_parsers():
    check_exit(0, "link status: UP\n")
    assert detect_error("link status: UP\n") is None
    with pytest.raises(HccnError) as info:
        parse_link("hccn_tool is busy, please try again.\n")  # exit status lost by a wrapper
    assert info.value.reason == "busy"


def test_ping_with_loss_prints_data_then_fails():
    # `-ping` prints its block on stdout and exits 1 with "Command execute failed!" on stderr.
    with pytest.raises(HccnError) as info:
        check_exit(1, fixture("ping__unknown__1__mangled") + "\nCommand execute failed!\n")
    assert info.value.reason == "command_failed"
