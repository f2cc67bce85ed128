"""The bounded reads of the other files the owner source uses: a Slurm prolog's mapping
directory (one file per chip logic id, holding the job ids on that chip) and a passwd file
(users' names by uid). Blocking: the source calls these in a thread."""

from __future__ import annotations

import itertools
import os

from exporter.core.inputfile import InputRefused, read_input
from exporter.owners.parse import OwnerError, mapping_device, parse_job_ids, parse_passwd

MAX_MAPPING_FILE = 4096  # a few job ids
MAX_MAPPING_ENTRIES = 1024  # directory entries looked at (a node has at most a few dozen chips)
MAX_PASSWD = 16 << 20  # a large site's /etc/passwd is a few MiB


def read_mapping(directory: str) -> dict[int, tuple[str, ...]]:
    """The job ids of each chip (by logic id) in a mapping directory; an empty, missing or
    unreadable file is a chip with no job (the epilog empties or removes it). OwnerError when
    the directory itself cannot be listed."""
    jobs: dict[int, tuple[str, ...]] = {}
    try:
        with os.scandir(directory) as entries:
            listed = [entry.name for entry in itertools.islice(entries, MAX_MAPPING_ENTRIES)]
    except FileNotFoundError:
        raise OwnerError("not_found", f"{directory} does not exist") from None
    except PermissionError:
        raise OwnerError("permission_denied", f"no permission to list {directory}") from None
    except OSError as exc:
        raise OwnerError("unreadable", f"{directory}: {exc}") from None
    for name in listed:
        device = mapping_device(name)
        if device is None:
            continue
        try:
            text = read_input(os.path.join(directory, name), MAX_MAPPING_FILE, root=directory).decode("utf-8", errors="replace")
        except InputRefused:
            continue
        found = parse_job_ids(text)
        if found:
            jobs[device] = found
    return jobs


def read_passwd(path: str) -> dict[int, str]:
    """User names by uid from a passwd file; OwnerError when it cannot be read."""
    try:
        text = read_input(path, MAX_PASSWD).decode("utf-8", errors="replace")
    except InputRefused as exc:
        raise OwnerError(exc.reason, str(exc)) from None
    return parse_passwd(text.splitlines())
