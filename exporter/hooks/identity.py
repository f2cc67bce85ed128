"""Who is reporting: job name, rank, world size and chip, from arguments or the launcher's env."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from exporter.hooks import env as names

# Same character sets the exporter accepts; anything else becomes "_" so a job name with
# spaces or unicode is still admitted rather than rejected batch after batch.
_ODD_JOB = re.compile(r"[^A-Za-z0-9_.:@/+-]")
_ODD_FRAMEWORK = re.compile(r"[^A-Za-z0-9_.+-]")
_DEVICE = re.compile(r"[0-9]{1,5}")
_MAX_LABEL = 128
_IMPORTED = time.time()  # where /proc is missing, the earliest this process is known to have run
_NS = re.compile(r"pid:\[([0-9]+)\]")


@dataclass(frozen=True)
class Identity:
    job_name: str
    rank: int
    world_size: int
    device: str | None  # chip logic id (npu-smi `info -m`), None when unknown
    framework: str
    pid: int
    started: float | None = None  # unix time the process started (its start-up counts from here)
    proc: str | None = None  # "<boot id>:<pid namespace inode>:<start ticks>": tells the exporter it is gone


def process_start(proc_dir: str = "/proc/self") -> tuple[float | None, str | None]:
    """(unix start time, /proc identity) of this process. From /proc on Linux: the start time in
    clock ticks since boot, placed on the wall clock through CLOCK_BOOTTIME (10 ms resolution);
    elsewhere the time the hooks were imported, and no identity."""
    try:
        with open(f"{proc_dir}/stat", "rb") as fh:
            stat = fh.read(4096).decode("ascii", "replace")
        ticks = int(stat[stat.rfind(")") + 2 :].split()[19])  # field 22, starttime
        since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        started = time.time() - max(0.0, since_start)
    except Exception:  # not Linux, or no /proc
        return _IMPORTED, None
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        found = _NS.fullmatch(os.readlink(f"{proc_dir}/ns/pid"))
    except Exception:
        return started, None
    return started, f"{boot}:{found.group(1)}:{ticks}" if found and boot else None


def clean_label(text: str, fallback: str, odd: re.Pattern[str] = _ODD_JOB) -> str:
    text = odd.sub("_", str(text).strip())[:_MAX_LABEL]
    if not text or not text[0].isalnum():
        text = (fallback + text)[:_MAX_LABEL]
    return text


def _int_env(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if value.isascii() and value.isdigit():
            return int(value)
    return None


def default_job_name(env: Mapping[str, str], run_name: str | None = None) -> str:
    """No job name given: $CANN_EXPORTER_JOB_NAME, else $JOB_NAME (the launcher's), else the
    framework's run name, else the script's name."""
    named = env.get(names.JOB_NAME) or env.get("JOB_NAME") or run_name
    if named:
        return named
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return os.path.splitext(script)[0] or "python"


def resolve_device(local_rank: int | None, env: Mapping[str, str]) -> str | None:
    """The chip logic id this process drives.

    torch_npu/MindSpore number the chips listed in ASCEND_RT_VISIBLE_DEVICES from 0; the
    process with LOCAL_RANK i uses the i-th of them (all chips when the variable is unset).
    """
    visible = [v.strip() for v in env.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        index = local_rank or 0
        return visible[index] if index < len(visible) and _DEVICE.fullmatch(visible[index]) else None
    if local_rank is not None:
        return str(local_rank)
    device_id = env.get("DEVICE_ID", "").strip()  # MindSpore/HCCL launchers
    return device_id if _DEVICE.fullmatch(device_id) else None


def resolve_identity(
    job_name: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    device: int | str | None = None,
    framework: str = "python",
    env: Mapping[str, str] | None = None,
    run_name: str | None = None,
) -> Identity:
    """Arguments win; then torchrun's RANK/WORLD_SIZE/LOCAL_RANK, then Ascend's RANK_ID/RANK_SIZE.
    The job name: ``job_name``, else the environment's, else ``run_name`` (the framework's), else the script's."""
    env = os.environ if env is None else env
    rank = rank if rank is not None else _int_env(env, "RANK", "RANK_ID", "OMPI_COMM_WORLD_RANK") or 0
    world_size = world_size if world_size is not None else _int_env(env, "WORLD_SIZE", "RANK_SIZE", "OMPI_COMM_WORLD_SIZE") or 1
    local_rank = _int_env(env, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
    if device is None:
        device = resolve_device(local_rank, env)
    started, proc = process_start()
    return Identity(
        job_name=clean_label(job_name or default_job_name(env, run_name), "job_"),
        rank=max(0, int(rank)),
        world_size=max(int(world_size), int(rank) + 1, 1),  # the exporter rejects rank >= world_size
        device=str(device) if device is not None and _DEVICE.fullmatch(str(device)) else None,
        framework=clean_label(framework, "f_", _ODD_FRAMEWORK),
        pid=os.getpid(),
        started=started,
        proc=proc,
    )
