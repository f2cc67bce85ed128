"""The resident simulator: one warm process answering simulated calls, for a few lines of bash.

A simulated call started as a whole Python process costs about 80 ms of CPU, nearly all of it
interpreter start and imports; the native npu-smi and hccn_tool cost a few milliseconds. A
simulated a3 node makes ~80 hccn_tool calls a round, so whole-process calls took seconds of CPU
from everything else on the machine (the exporter's event loop, and any server it is compared
with) and made the simulated node far heavier than a real one.

Each call is still a real subprocess with its own pipes, exit status and process group: a bash
client (``CLIENT``) sends its arguments and CANN_SIM_* variables to this process over loopback
TCP (bash's /dev/tcp), with a token that only readers of a 0600 file know, and copies the
answer to its stdout or stderr and exits with the answer's status. Only answers that need no
fault and do not stream are given here (``answer_at_once`` of each tool, the same ``run`` the
stand-in calls); for everything else (a fault or a fault file, `info watch`, wrong simulator
options, no resident) the client becomes the whole stand-in (``exec``), so a hang still holds
the caller's pipe from the caller's process group and every fault behaves as before.

The process exits when its stdin closes, i.e. with the exporter that started it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading

TOOLS = {"npusmi": "exporter.simulator.npusmi", "hccn": "exporter.simulator.hccn"}
MAX_REQUEST_BYTES = 64 * 1024
MAX_VARIABLES = 64
MAX_CLIENTS = 8            # answers at once; a client turned away runs the stand-in
CLIENT_TIMEOUT = 5.0       # seconds a client may take to send its request
START_TIMEOUT = 10.0

# $1 port, $2 token file, $3 tool, $4 python, $5 the stand-in's code; then the stand-in's argv.
# The request is NUL-separated: token, tool, argc, args, NAME=value..., an empty field.
CLIENT = r"""
port=$1 token_file=$2 tool=$3 py=$4 code=$5; shift 5
stand_in() { exec 3<&-; exec "$py" -I -S -c "$code" "$@"; }
IFS= read -r token <"$token_file" 2>/dev/null || stand_in "$@"
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || stand_in "$@"
{
  printf '%s\0' "$token" "$tool" "$#" "$@"
  for name in ${!CANN_SIM_@}; do printf '%s=%s\0' "$name" "${!name}"; done
  printf '\0'
} >&3 2>/dev/null || stand_in "$@"
read -r status stream <&3 || stand_in "$@"
case $status in ''|*[!0-9]*) stand_in "$@" ;; esac
case $stream in
  out) cat <&3 ;;
  err) cat <&3 >&2 ;;
  *) stand_in "$@" ;;
esac
exit "$status"
"""


# --- the resident process ---------------------------------------------------------------------

def parse_request(data: bytes, token: bytes) -> tuple[str, list[str], dict[str, str]] | None:
    """(tool, argv, CANN_SIM_* variables) of a whole request; None while it is incomplete.
    Raises ValueError for a request that is not ours or not well formed."""
    fields = data.split(b"\0")
    if len(fields) < 4:
        return None
    if not secrets.compare_digest(fields[0], token):
        raise ValueError("wrong token")
    tool, count = fields[1].decode(), fields[2]
    if tool not in TOOLS or not count.isdigit():
        raise ValueError("bad tool or argument count")
    args_end = 3 + int(count)
    if args_end > len(fields) - 1:
        return None
    end = next((i for i in range(args_end, len(fields) - 1) if not fields[i]), None)
    if end is None:
        return None
    if end - args_end > MAX_VARIABLES:
        raise ValueError("too many variables")
    argv = [os.fsdecode(field) for field in fields[3:args_end]]
    env = dict(os.fsdecode(field).partition("=")[::2] for field in fields[args_end:end])
    if any(not name.startswith("CANN_SIM_") for name in env):
        raise ValueError("a variable that is not CANN_SIM_*")
    return tool, argv, env


def answer(tool: str, argv: list[str], env: dict[str, str]) -> tuple[int, str, bytes] | None:
    """(status, stream, bytes) when the call can be answered here; None: run the stand-in."""
    if any(name.endswith("FAULT_FILE") for name in env):
        return None   # its faults are the stand-in's to read (and the file is not ours to open)
    module = importlib.import_module(TOOLS[tool])
    try:
        options, rest = module.parse_sim_options(argv, env)
    except ValueError:
        return None   # the stand-in prints the error and exits 2
    answered = module.answer_at_once(options, rest)
    if answered is None:
        return None
    status, out, err = answered
    if not 0 <= status <= 255 or (out and err):
        return None
    return (status, "err", err) if err else (status, "out", out)


def _serve_client(conn: socket.socket, token: bytes, slots: threading.BoundedSemaphore) -> None:
    try:
        with conn:
            conn.settimeout(CLIENT_TIMEOUT)
            data = b""
            request = None
            while request is None:
                chunk = conn.recv(16384)
                if not chunk or len(data) + len(chunk) > MAX_REQUEST_BYTES:
                    return
                data += chunk
                request = parse_request(data, token)
            try:
                answered = answer(*request)
            except Exception as exc:  # a simulator bug must not end the resident: the stand-in answers
                print(f"resident simulator: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                answered = None
            if answered is None:
                conn.sendall(b"run\n")
            else:
                status, stream, body = answered
                conn.sendall(f"{status} {stream}\n".encode() + body)
    except (OSError, ValueError):
        pass   # a client that went away or was not ours
    finally:
        slots.release()


def _exit_with_parent(directory: str) -> None:
    """Block until stdin closes (our parent is gone), then remove the token and exit."""
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    shutil.rmtree(directory, ignore_errors=True)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """`resident NICE`: listen on loopback, print `PORT TOKEN_FILE`, answer until stdin closes."""
    args = sys.argv[1:] if argv is None else argv
    os.nice(int(args[0]) if args else 0)
    for tool in TOOLS.values():
        importlib.import_module(tool)   # warm before the first call
    directory = tempfile.mkdtemp(prefix="cann-sim-")
    token = secrets.token_hex(16)
    token_file = os.path.join(directory, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(token + "\n")
    threading.Thread(target=_exit_with_parent, args=(directory,), daemon=True).start()
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    print(listener.getsockname()[1], token_file, flush=True)
    slots = threading.BoundedSemaphore(MAX_CLIENTS)
    while True:
        conn, _ = listener.accept()
        if not slots.acquire(blocking=False):
            conn.close()   # its client runs the stand-in
            continue
        threading.Thread(target=_serve_client, args=(conn, token.encode(), slots), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
