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
    "A2301001": "SeparateNPU",  # listed under RestartBusiness and SeparateNPU: the more severe
    "B4060011": "RestartBusiness",  # listed twice under the same level
}


def test_the_shipped_table_resolves_the_documented_codes():
    table = load_fault_codes()
    assert len(table.levels) == 802  # 804 entries, two of them repeated
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
    path.write_text(json.dumps({"SeparateNPUCodes": ["0xabc", "80E21007"], "NotHandleFaultCodes": ["abc"]}))
    table = load_fault_codes(str(path))
    assert table.level("ABC") == "SeparateNPU" and table.level("80E21007") == "SeparateNPU"
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
    ],
)
def test_a_bad_table_is_refused_naming_the_entry(text: str, problem: str):
    with pytest.raises(FaultCodeError) as caught:
        parse_fault_codes(text, "codes.json")
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_check_config_validates_the_site_table(tmp_path: Path, capsys):
    codes = tmp_path / "codes.json"
    codes.write_text('{"SeparateNPUCodes": ["80E2100G", "zz"], "RebootCodes": []}')
    config = tmp_path / "c.yaml"
    config.write_text(f"npu_smi:\n  fault_codes: {codes}\n")
    assert main(["check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("npu_smi.fault_codes: ") == 3 and "'80E2100G'" in err and "'zz'" in err and "'RebootCodes'" in err
    codes.write_text('{"SeparateNPUCodes": ["80E21007"]}')
    assert main(["check-config", str(config)]) in (0, 3)  # 3: no npu-smi on this machine
    assert "npu_smi.fault_codes" not in capsys.readouterr().err
