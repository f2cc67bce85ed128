"""npu-smi and hccn_tool stand-ins that replay the simulator's captured answers.

A simulated call is a whole Python start (about 80 ms of CPU); a native npu-smi costs a few
milliseconds. Measured beside our exporter, the simulator's CPU would be charged to the
machine, not to the tool we stand in for. So each benchmark's exporter runs real tools that
are tiny `sh` scripts: the first call of an argv asks the simulator once and keeps its
answer (stdout, stderr, exit status) in a file; every later call of that argv is a file read
(`cat`). Answers are frozen at their first capture: the node looks the same all run long.
"""

from __future__ import annotations

import atexit
import shlex
import shutil
import tempfile
from pathlib import Path

from exporter.core.registration import Simulated
from exporter.node.simulate import chip_scenario, hccn_tool_command, simulated_tool

MAX_KEY = 200  # characters of the joined argv kept as a file name; longer ones always ask the simulator

# $dir is where the answers are kept, $sim the simulator's argv prefix (shell-quoted).
SCRIPT = """#!/bin/sh
dir={dir}
IFS=_
key="$*"
IFS=' '
case $key in ''|*/*|.*) exec {sim} "$@" ;; esac
[ ${{#key}} -le {max_key} ] || exec {sim} "$@"
f="$dir/$key"
if [ ! -f "$f.rc" ]; then
  tmp="$f.$$"
  {sim} "$@" >"$tmp.out" 2>"$tmp.err"
  echo $? >"$tmp.rc"
  mv "$tmp.out" "$f.out"; mv "$tmp.err" "$f.err"; mv "$tmp.rc" "$f.rc"
fi
cat "$f.out"
[ -s "$f.err" ] && cat "$f.err" >&2
read -r status <"$f.rc"
exit "$status"
"""

_tools: list[tuple[str, str]] = []  # (npu-smi, hccn_tool) of this benchmark run, made once


def replay_tools(model: str, scenario: str = "healthy") -> tuple[str, str]:
    """Paths of an npu-smi and an hccn_tool replaying the simulator (``model``, ``scenario``),
    made once per benchmark run and removed when it ends."""
    if not _tools:
        root = Path(tempfile.mkdtemp(prefix="cann-bench-replay-"))
        atexit.register(shutil.rmtree, root, True)
        npu_smi = (*simulated_tool("npusmi"), "--model", model, "--scenario", chip_scenario(scenario), "--")
        hccn = hccn_tool_command(Simulated(scenario, model))
        _tools.append((_script(root, "npu-smi", npu_smi), _script(root, "hccn_tool", hccn)))
    return _tools[0]


def _script(root: Path, name: str, sim: tuple[str, ...]) -> str:
    answers = root / f"{name}.answers"
    answers.mkdir()
    path = root / name
    path.write_text(SCRIPT.format(dir=shlex.quote(str(answers)), sim=shlex.join(sim), max_key=MAX_KEY))
    path.chmod(0o755)
    return str(path)
