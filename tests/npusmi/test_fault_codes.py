"""The fault-code table: the shipped copy of Huawei's table resolves the codes its facts name,
levels follow their precedence, a site's own file replaces it (check-config names each bad entry)
and a code missing from the table is `unknown`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.core import faultlevels
from exporter.npusmi.faultcodes import SHIPPED, FaultCodeError, load_fault_codes, parse_fault_codes

# The examples of the table's documentation, one per level, and the two codes listed twice.
EXAMPLES = {
    "80E21007": "NotHandleFault",
    "A4025021": "NotHandleFault",
    "80C98008": "RestartRequest",
    "8C204E00": "RestartBusiness",
    "8C084E00": "FreeRestartNPU",
    "8C03A000": "RestartNPU",
    "81AF8000": "RestartNPU",
    "80E3A201": "SeparateNPU",
    "8F180200": "SeparateNPU",
    "8118043C": "PreSeparateNPU",
    "81A3880C": "SubHealthFault",
    "A2301001": "SeparateNPU",  # listed upstream under RestartBusiness too: kept under the more severe only (NOTICE)
    "B4060011": "RestartBusiness",  # listed twice under the same level
}


def test_the_shipped_table_resolves_the_documented_codes():
    table = load_fault_codes()
    assert len(table.levels) == 802  # 803 entries, one of them repeated under its level
    for code, level in EXAMPLES.items():
        assert table.level(code) == level, code
    assert table.level("0x81af8000") == "RestartNPU"  # a current-fault-event id
    assert table.level("DEADBEEF") == "unknown"


def test_the_shipped_table_is_attributed_beside_it():
    notice = SHIPPED.with_name("faultcodes.NOTICE").read_text()
    assert "Apache License, Version 2.0" in notice and "Huawei" in notice and "Ascend/mind-cluster" in notice


def test_precedence_most_severe_wins_and_unknown_never_hides_an_action():
    assert faultlevels.most_severe(["NotHandleFault", "RestartNPU", "FreeRestartNPU"]) == "RestartNPU"
    assert faultlevels.most_severe(["PreSeparateNPU", "SeparateNPU"]) == "SeparateNPU"
    assert faultlevels.most_severe(["unknown", "RestartRequest"]) == "RestartRequest"
    assert faultlevels.most_severe(["unknown", "SubHealthFault", "NotHandleFault"]) == "unknown"
    assert faultlevels.most_severe([]) == "none"
    assert faultlevels.NAMES[0] == "SeparateNPU" and faultlevels.NAMES[-1] == "none"


def test_a_site_table_replaces_the_shipped_one(tmp_path: Path):
    path = tmp_path / "codes.json"
    path.write_text(json.dumps({"SeparateNPUCodes": ["0xabc", "80E21007", "ABC"], "NotHandleFaultCodes": ["def"]}))
    table = load_fault_codes(str(path))
    assert table.level("ABC") == "SeparateNPU" and table.level("80E21007") == "SeparateNPU" and table.level("0xDEF") == "NotHandleFault"
    assert table.level("8C03A000") == "unknown"  # not in the site's file: the shipped table is not consulted


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[]", "must be a JSON object"),
        ("{", "not valid JSON"),
        ('{"RebootCodes": ["80E21007"]}', "'RebootCodes' is not a level of the table"),
        ('{"SeparateNPUCodes": "80E21007"}', "SeparateNPUCodes: must be a list of codes"),
        ('{"SeparateNPUCodes": ["80E2100G"]}', "'80E2100G' is not a hex code"),
        ('{"SeparateNPUCodes": [12]}', "'12' is not a string"),
        ('{"SeparateNPUCodes": []}', "lists no code"),
        (
            '{"SeparateNPUCodes": ["0xabc"], "NotHandleFaultCodes": ["ABC"]}',
            "code ABC is listed under both SeparateNPUCodes and NotHandleFaultCodes",
        ),
        ('{"SeparateNPUCodes": ["1"], "RestartNPUCodes": ["2"], "SeparateNPUCodes": ["3"]}', "'SeparateNPUCodes' is named more than once"),
        (json.dumps({"SeparateNPUCodes": ["1"] * 20_001}), "lists 20001 codes; at most 20000"),
    ],
)
def test_a_bad_table_is_refused_naming_the_entry(text: str, problem: str):
    with pytest.raises(FaultCodeError) as caught:
        parse_fault_codes(text, "codes.json")
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_problems_are_listed_up_to_a_bound():
    text = json.dumps({"SeparateNPUCodes": [f"{n:X}" for n in range(30)], "NotHandleFaultCodes": [f"0x{n:x}" for n in range(30)]})
    with pytest.raises(FaultCodeError) as caught:
        parse_fault_codes(text, "codes.json")
    assert len(caught.value.problems) == 21 and caught.value.problems[-1] == "codes.json: ... and 10 more"


def test_a_table_over_its_size_is_refused(tmp_path: Path):
    path = tmp_path / "codes.json"
    path.write_text('{"SeparateNPUCodes": ["80E21007"]}' + " " * (4 << 20))
    with pytest.raises(FaultCodeError) as caught:
        load_fault_codes(str(path))
    assert "codes.json" in caught.value.problems[0]


def test_check_config_validates_the_site_table(tmp_path: Path, capsys):
    codes = tmp_path / "codes.json"
    codes.write_text('{"SeparateNPUCodes": ["80E2100G", "zz"], "RebootCodes": []}')
    config = tmp_path / "c.yaml"
    config.write_text(f"npu_smi:\n  fault_codes: {codes}\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("npu_smi.fault_codes: ") == 3 and "'80E2100G'" in err and "'zz'" in err and "'RebootCodes'" in err
    codes.write_text('{"SeparateNPUCodes": ["80E21007"], "RestartNPUCodes": ["0x80e21007"]}')
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "npu_smi.fault_codes: " in err and "code 80E21007 is listed under both SeparateNPUCodes and RestartNPUCodes" in err
    codes.write_text('{"SeparateNPUCodes": ["80E21007"]}')
    assert main(["check-config", str(config)]) in (0, 3)  # 3: no npu-smi on this machine
    assert "npu_smi.fault_codes" not in capsys.readouterr().err


def test_serve_refuses_to_start_with_a_conflicting_table(tmp_path: Path, capsys):
    codes = tmp_path / "codes.json"
    codes.write_text('{"SeparateNPUCodes": ["80E21007"], "SubHealthFaultCodes": ["80E21007"]}')
    assert main(["serve", "--npu-smi.fault-codes", str(codes)]) == 2  # before it listens or reads a chip
    assert "code 80E21007 is listed under both SeparateNPUCodes and SubHealthFaultCodes" in capsys.readouterr().err
