"""freeze_startup, in a process of its own (freezing pytest's heap would outlive the test)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc
from exporter.commands import serve                 # what `serve` has imported when it freezes
from exporter.core.heap import freeze_startup

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a

frozen = freeze_startup()
gc.collect()
walked = len(gc.get_objects())
cycle()                                             # garbage made after the freeze
print(frozen, walked, gc.collect())
"""


def test_start_up_objects_leave_the_collector_s_walk_and_later_cycles_are_still_collected():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    frozen, walked, collected = map(int, done.stdout.split())
    assert frozen > 10_000  # modules, classes, functions: the bulk of a started exporter
    assert walked < frozen / 10  # what a full collection still walks
    assert collected >= 2  # the cycle made afterwards is found and freed
