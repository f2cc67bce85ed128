"""`serve` hands the GIL back to the event loop within 1 ms (core/gil.py)."""

from __future__ import annotations

import sys

from exporter.core.gil import SWITCH_INTERVAL, favour_the_event_loop


def test_the_switch_interval_is_shortened():
    before = sys.getswitchinterval()
    try:
        favour_the_event_loop()
        assert sys.getswitchinterval() == SWITCH_INTERVAL < before
    finally:
        sys.setswitchinterval(before)
