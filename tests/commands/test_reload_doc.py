"""docs/reloading.md, what a SIGHUP applies, is generated from the options declared live and
current; the reload keeps exactly those (needs_restart names every other changed key)."""

from __future__ import annotations

import os

from exporter.app.reloading import reload_doc
from exporter.app.settings import OPTIONS, build_settings, needs_restart
from exporter.npusmi.source import LIVE_OPTIONS
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "reloading.md"


def test_the_reload_table_is_current() -> None:
    if os.environ.get("UPDATE_GOLDENS"):
        DOC.write_text(reload_doc())
    assert DOC.read_text() == reload_doc(), "docs/reloading.md is stale: UPDATE_GOLDENS=1 make test, then read the diff"


def test_live_options_need_no_restart_and_the_rest_do() -> None:
    running = build_settings()
    live = {o.key for o in OPTIONS if o.live}
    assert live == {f"npu_smi.{name}" for name in LIVE_OPTIONS} | {"npu_smi.fault_codes"}
    changed = build_settings(flags={"npu_smi.interval": "20s", "npu_smi.fault_codes": "/etc/codes.json", "max_age": "240s"})
    assert needs_restart(running, changed) == ["max_age"]
    assert needs_restart(running, build_settings(flags={"collector.pods": False, "hccn.timeout": "2s"})) == [
        "hccn.timeout",
        "collector.pods",
    ]
