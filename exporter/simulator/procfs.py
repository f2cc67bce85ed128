"""The processes of a simulated node, as /proc shows them: who holds each chip.

`npu-smi info` on a simulated node prints one process row per busy chip (scenarios.py: the
pid is the model's base pid plus 5003 per logic id). The exporter's owner source reads each
such process's ``/proc/PID/cgroup`` (and ``stat`` for its start time, ``status`` for a Slurm v2
job's user) to tell who holds the chip. Here those processes live, one cgroup v2 path per
chip, cycling through every runtime the source tells apart (OWNERS, by logic id modulo 8):

    logic id 0  kubernetes  a pod's container (systemd driver, containerd)
    logic id 1  slurm       job 4242, step 0, of alice (uid 1001): underutilized's low chip
    logic id 2  docker      a `docker run` container: degraded's critical chip
    logic id 3  containerd  a nerdctl container
    logic id 4  podman      a rootful Podman container: underutilized's other low chip
    logic id 5  systemd     mindie.service
    logic id 6  host        a login session's process
    logic id 7  slurm       job 4243, step 0, of bob (uid 1002)

An A3 node's 16 chips repeat the cycle: the pod, the jobs and the containers hold two chips
each. Users' names are in ``passwd`` beside the trees. The pids are those of the simulator's
default seed (0) and one process per busy chip; another seed or ``--processes`` prints pids
these trees do not hold (the source counts them as vanished).

The trees ship with the package under procfs/<model>/, so the exporter reads them without
importing the simulator (node/simulate.py finds them by path); `python -m
exporter.simulator.procfs` writes them again from the models, and tests/simulator/test_procfs.py
keeps them equal.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from exporter.simulator.models import MODELS, NodeModel
from exporter.simulator.scenarios import simulate

TREES = Path(__file__).with_name("procfs")  # one /proc per model, by its name
PASSWD = Path(__file__).with_name("passwd")  # the Slurm jobs' users
USERS = (("alice", 1001), ("bob", 1002))
BOOT_TICKS = 4_200_000  # the jobs started some 11 hours after boot (100 ticks a second)

# Who holds a chip, by its logic id modulo len(OWNERS): (runtime, cgroup v2 path, uid).
_POD = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f2a6c1e_8b4d_4e2a_9c7f_5d1e0b6a4c21.slice"
OWNERS: tuple[tuple[str, str, int], ...] = (
    ("kubernetes", f"/{_POD}/cri-containerd-{'7c1e' * 16}.scope", 0),
    ("slurm", "/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", 1001),
    ("docker", f"/system.slice/docker-{'d0c4' * 16}.scope", 0),
    ("containerd", f"/system.slice/nerdctl-{'c7d2' * 16}.scope", 0),
    ("podman", f"/machine.slice/libpod-{'9a0d' * 16}.scope/container", 0),
    ("systemd", "/system.slice/mindie.service", 0),
    ("host", "/user.slice/user-1000.slice/session-3.scope", 1000),
    ("slurm", "/system.slice/slurmstepd.scope/job_4243/step_0/user/task_0", 1002),
)


def owner(logic_id: int) -> tuple[str, str, int]:
    """(runtime, cgroup path, uid) of the chip with ``logic_id``."""
    return OWNERS[logic_id % len(OWNERS)]


def stat_line(pid: int, comm: str, start: int) -> str:
    """A /proc/PID/stat line as the kernel writes it (52 fields; field 22 the start time)."""
    head = f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 182411 0 12 0 90312 4411 0 0 20 0 48 0 {start}"
    tail = "36012544000 2411520 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0"
    return f"{head} {tail}\n"


def status_text(comm: str, pid: int, uid: int) -> str:
    """The first lines of /proc/PID/status, down to the user ids."""
    ids = "\t".join([str(uid)] * 4)
    return f"Name:\t{comm}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{pid}\nNgid:\t0\nPid:\t{pid}\nPPid:\t1\nTracerPid:\t0\nUid:\t{ids}\nGid:\t{ids}\n"


def tree(model: NodeModel) -> dict[str, str]:
    """Every file of the model's /proc: its path under the root (`/` separated) -> its text.
    The processes npu-smi shows on the healthy node (every chip busy); a Slurm process also
    has its status (a v2 path does not carry the user)."""
    logic = {(chip.npu_id, chip.chip_id): chip.logic_id for chip in model.chips}
    files: dict[str, str] = {}
    for process in simulate(model, "healthy", 0.0).processes:
        logic_id = logic[(process.npu_id, process.chip_id)]
        runtime, path, uid = owner(logic_id)
        comm = process.name[:15]
        files[f"{process.pid}/cgroup"] = f"0::{path}\n"
        files[f"{process.pid}/stat"] = stat_line(process.pid, comm, BOOT_TICKS + 97 * logic_id)
        if runtime == "slurm":
            files[f"{process.pid}/status"] = status_text(comm, process.pid, uid)
    return files


def passwd() -> str:
    return "".join(f"{name}:x:{uid}:{uid}:{name}:/home/{name}:/bin/bash\n" for name, uid in USERS)


def write(root: Path, passwd_file: Path) -> None:
    """Every model's tree under ``root``/<model> (replacing what was there) and the users."""
    for name, model in MODELS.items():
        shutil.rmtree(root / name, ignore_errors=True)
        for path, text in tree(model).items():
            target = root / name / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="ascii")
    passwd_file.write_text(passwd(), encoding="ascii")


def main(argv: list[str] | None = None) -> int:
    """`python -m exporter.simulator.procfs [DIR]`: write the trees and passwd (default: the
    shipped ones; DIR: DIR/procfs/<model> and DIR/passwd)."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        write(Path(args[0]) / "procfs", Path(args[0]) / "passwd")
    else:
        write(TREES, PASSWD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
