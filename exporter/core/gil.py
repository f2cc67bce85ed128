"""How soon the event loop gets the GIL back from a busy thread.

The event loop shares the interpreter with threads that run Python for tens of milliseconds:
the metrics encoder, which encodes a sampler run's changes while scrapes are being answered
(web/scrape.py), and the profile parser. A thread waiting for the GIL gets it when the holder
releases it, at the latest after the switch interval, and a request hands the GIL over several
times (each read, write and poll): with the default 5 ms, a scrape answered during an encode
took 5-15 ms instead of one. At 1 ms the encoder yields more often, which costs it little; the
a3 benchmark's scrape p99 during the encode of a sampler run went from 2-3x to 1-1.5x the static
floor (benchmarks/exporter_scrape_a3.py).
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL = 0.001  # seconds


def favour_the_event_loop() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL)
