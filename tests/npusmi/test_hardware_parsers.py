"""The health and interconnect types: every copied sample parses to the values read by hand,
and the layouts npu-smi's printf calls make (no published capture of `-t hccs`, `-t hccs-bw`
or a `-t pcie-err` with counters) parse label by label."""

from __future__ import annotations

import ast

import pytest

from exporter.npusmi import parse as npusmi_parse
from tests.support.paths import NPU_SMI_FIXTURES


def sample(name: str) -> str:
    return (NPU_SMI_FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


def test_volt_310b_card_keeps_the_chip_and_drops_the_mcu():
    # Chip 0 at 0.90 V (trailing space on the page), then the MCU block at 5.07 V.
    assert npusmi_parse.parse_volt(sample("info-t-volt__310B__unknown__1")) == (npusmi_parse.ChipVoltage(0, 0, 0.90),)


def test_volt_one_chip_answers():
    assert npusmi_parse.parse_volt(sample("info-t-volt__310B__unknown__2"), npu_id=3, chip_id=0) == (npusmi_parse.ChipVoltage(3, 0, 0.80),)
    assert npusmi_parse.parse_volt(sample("info-t-volt__950__unknown__1")) == (npusmi_parse.ChipVoltage(0, 0, 0.72),)


def test_volt_na_is_absent_and_a_cut_card_answer_is_truncated():
    assert npusmi_parse.parse_volt("\tVoltage(V)                     : NA\n", npu_id=1, chip_id=1) == (
        npusmi_parse.ChipVoltage(1, 1, None),
    )
    cut = "\tNPU ID : 0\n\tChip Count : 2\n\n\tChip ID : 0\n\tVoltage(V) : 0.81\n"
    with pytest.raises(npusmi_parse.NpuSmiError) as error:
        npusmi_parse.parse_volt(cut)
    assert error.value.reason == "truncated"


def test_sensors_950_na_is_absent():
    (record,) = npusmi_parse.parse_sensors(sample("info-t-sensors__950__unknown__1"), npu_id=0)
    assert record.temperatures == (("soc_max", 67.0), ("ndie", 65.0), ("hbm", 63.0))


def test_sio_950():
    assert npusmi_parse.parse_sio(sample("info-t-sio-info__950__unknown__1"), npu_id=2) == (
        npusmi_parse.ChipSio(2, 0, tx_errors=0, rx_errors=0),
    )


@pytest.mark.parametrize(
    ("name", "parser"),
    [
        ("info-t-pcie-err__310B__unknown__1__unsupported", npusmi_parse.parse_pcie_errors),
        ("info-t-err-count__310B__unknown__1__unsupported", npusmi_parse.parse_pcie_errors),
        ("info-t-spod-info__950__unknown__1__unsupported", npusmi_parse.parse_superpod),
    ],
)
def test_unsupported_answers_are_not_supported(name, parser):
    with pytest.raises(npusmi_parse.NpuSmiError) as error:
        parser(sample(name), npu_id=0, chip_id=0)
    assert error.value.reason == "not_supported"
    assert "does not support querying" in str(error.value)


def spod_answers() -> dict[int, str]:
    """The A3 pod log prints each device's answer as a Python list of its lines."""
    out = {}
    for line in sample("info-t-spod-info__910_93-A3__unknown__1__mangled").splitlines():
        head, _, listed = line.partition("super_device_id: ")
        device = int(head.rsplit("device_id: ", 1)[1].rstrip(", "))
        out[device] = "".join(ast.literal_eval(listed))
    return out


def test_spod_info_a3():
    answers = spod_answers()
    assert sorted(answers) == [0, 1, 10, 11, 12]
    (pod,) = npusmi_parse.parse_superpod(answers[0], npu_id=0, chip_id=0)
    assert pod == npusmi_parse.SuperPod(0, 0, sdid=167772160, super_pod_size=384, super_pod_id=0, server_index=40)
    (pod,) = npusmi_parse.parse_superpod(answers[11], npu_id=5, chip_id=1)
    assert (pod.npu_id, pod.chip_id, pod.sdid, pod.server_index) == (5, 1, 169148427, 40)


def kv(label: str, value: str) -> str:
    return f"\t{label:<30} : {value}\n"  # npu-smi's "\t%-30s : %s"


def test_pcie_err_labels_of_both_families():
    a2 = "".join(
        kv(label, str(n))
        for n, label in enumerate(["TX Error Count", "RX Error Count", "Lcrc Error Count", "Ecrc Error Count", "Retry Count"], 1)
    )
    (record,) = npusmi_parse.parse_pcie_errors(a2, npu_id=4, chip_id=0)
    assert record.counts == (("tx", 1), ("rx", 2), ("lcrc", 3), ("ecrc", 4), ("retry", 5))
    p310 = "".join(
        kv(label, str(10 * n))
        for n, label in enumerate(["Pcs Rx Error Count", "Phy Lane Error Count", "Dl Lcrc Error Count", "Dl Dcrc Error Count"], 1)
    )
    (record,) = npusmi_parse.parse_pcie_errors(p310, npu_id=0, chip_id=1)
    assert record.counts == (("pcs_rx", 10), ("phy_lane", 20), ("dl_lcrc", 30), ("dl_dcrc", 40))


def hccs_list(values) -> str:
    return "[" + "".join(f"{v:<20} " for v in values) + "]"  # "%-20llu " per link, in brackets


def hccs_text(health="OK", errors=(0, 0, 0), first_error="NA", prefix="hccs") -> str:
    lanes = ["1111" + " " * 16] * 3
    return (
        kv(f"{prefix} health status ", health)
        + kv(f"{prefix} lane mode ", hccs_list([4, 4, 2]))
        + kv(f"{prefix} link lane list ", "[" + " ".join(lanes) + " ]")
        + kv(f"{prefix} link speed ", hccs_list([224, 224, 112]))
        + kv(f"{prefix} tx packets ", hccs_list([1993002168, 1434439505, 0]))
        + kv(f"{prefix} tx bytes ", hccs_list([39860043360, 28688790100, 0]))
        + kv(f"{prefix} rx packets ", hccs_list([2091328898, 760745014, 7]))
        + kv(f"{prefix} rx bytes ", hccs_list([41826577960, 15214900280, 140]))
        + kv(f"{prefix} retry count ", hccs_list([0, 3, 0]))
        + kv(f"{prefix} error count ", hccs_list(errors))
        + kv(f"{prefix} first error lane ", first_error)
    )


def test_hccs_links_by_list_position():
    (record,) = npusmi_parse.parse_hccs(hccs_text(), npu_id=1, chip_id=0)
    assert (record.npu_id, record.chip_id, record.healthy, record.first_error_lane) == (1, 0, True, None)
    assert [link.link for link in record.links] == [0, 1, 2]
    assert record.links[1] == npusmi_parse.HccsLink(
        1,
        lane_mode=4,
        lane_list="1111",
        speed_gbps=224,
        tx_packets=1434439505,
        tx_bytes=28688790100,
        rx_packets=760745014,
        rx_bytes=15214900280,
        retries=3,
        errors=0,
    )
    assert record.links[2].speed_gbps == 112


def test_hccs_nok_with_errors_and_the_xlink_spelling():
    (record,) = npusmi_parse.parse_hccs(hccs_text("NOK", (0, 0, 12), "2", prefix="xlink"), npu_id=0, chip_id=1)
    assert record.healthy is False and record.first_error_lane == 2
    assert [link.errors for link in record.links] == [0, 0, 12]


def test_hccs_310p_counters_only():
    text = "".join(
        kv(f"hccs {name} ", hccs_list([5, 6]))
        for name in ("tx packets", "tx bytes", "rx packets", "rx bytes", "retry count", "error count")
    )
    (record,) = npusmi_parse.parse_hccs(text, npu_id=0, chip_id=0)
    assert record.healthy is None and len(record.links) == 2
    assert record.links[0].lane_mode is None and record.links[1].tx_packets == 6


def test_hccs_bandwidth_table():
    # "%-30s %-30s %-30s" header, "%-35d %-30.6f %-30.6f" rows, then "total".
    text = f"{'hccs link':<30} {'tx_bandwidth(GB/S)':<30} {'rx_bandwidth(GB/S)':<30}\n"
    for index, (tx, rx) in enumerate([(12.5, 0.25), (0.0, 3.0)]):
        text += f"{index:<35d} {tx:<30.6f} {rx:<30.6f}\n"
    text += f"{'total':<35} {12.5:<30.6f} {3.25:<30.6f}\n"
    record = npusmi_parse.parse_hccs_bandwidth(text, npu_id=6, chip_id=1)
    assert record == npusmi_parse.ChipHccsBandwidth(6, 1, ((0, 12.5, 0.25), (1, 0.0, 3.0)))


def test_hccs_bandwidth_garbled_and_unsupported():
    with pytest.raises(npusmi_parse.NpuSmiError) as error:
        npusmi_parse.parse_hccs_bandwidth("0 1.0 2.0\n", npu_id=0)
    assert error.value.reason == "garbled"
    with pytest.raises(npusmi_parse.NpuSmiError) as error:
        npusmi_parse.parse_hccs_bandwidth("This device does not support querying hccs-bw.\n", npu_id=0)
    assert error.value.reason == "not_supported"
