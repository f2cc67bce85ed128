"""`python -m tests.support.stuck_exporter FIFO serve ...`: the exporter with its profile scan
made to block for ever in a plain open() of FIFO (no writer), as a read on a hung network mount
would: nothing of the exporter's own can block like this any more, so the fault is built in."""

from __future__ import annotations

import sys

import exporter.profiles.source as profile_source
from exporter.cli import main


def block_scans_on(fifo: str) -> None:
    real = profile_source.find_profiles

    def blocked(*args, **kwargs):
        with open(fifo, "rb") as handle:  # blocks in open(): no writer ever comes
            handle.read()
        return real(*args, **kwargs)

    profile_source.find_profiles = blocked


if __name__ == "__main__":
    block_scans_on(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
