"""Train a small model with the cann-exporter training hook, and show what the exporter made of it.

    make example                                   # on a fresh clone; or:
    python examples/train_with_hooks.py --steps 500

With PyTorch installed it trains a small MLP: on an Ascend NPU when torch_npu is installed,
on CUDA when available, else on the CPU (`pip install torch==2.13.0` installs the CPU build).
Without PyTorch (or with `--backend stdlib`) it runs a synthetic loop through the
standard-library `Monitor`, which is all a loop needs to report.

Each step is split into phases under the names a loop would use: dataloader (next batch), h2d
(copy to the device), forward, backward, optimizer and d2h (reading the loss back, every
--log-every steps); the exporter serves each with its stage (data, h2d, compute, d2h). The steps go to the exporter at --url ($CANN_EXPORTER_URL, else
http://127.0.0.1:9435, where `make run` listens); when nothing answers there, the example
starts a temporary exporter on the built-in simulator for its run. At the end it prints the
`npu_job_*` series the exporter serves for the job.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError:  # the standard-library loop still runs
    torch = None

if torch is not None:
    try:  # Ascend: registers torch.npu
        import torch_npu  # noqa: F401
    except ImportError:
        pass

from exporter.hooks import DEFAULT_URL, Monitor

LISTENING = re.compile(r"msg=listening address=(127\.0\.0\.1:\d+)")
STOP_WAIT = 30  # seconds from SIGTERM to SIGKILL for the temporary exporter
# The temporary exporter's peak for its simulated 910B3 at bf16: an example figure set with
# npu_smi.peak_flops (source="config"), which wins over the 294.9 TFLOPS the exporter derives from
# the chip's 20 AI cores at 1800 MHz. The synthetic loop declares FLOPs for about 40% of it.
EXAMPLE_PEAK = 3.13e14
SYNTHETIC_FLOPS = 0.4 * 0.008 * EXAMPLE_PEAK  # per step of ~8 ms


# --- the PyTorch loop --------------------------------------------------------------------------


def pick_device() -> torch.device:
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return torch.device("npu", int(os.environ.get("LOCAL_RANK", "0")))
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def make_data(samples: int, features: int = 32, classes: int = 4) -> TensorDataset:
    """A learnable synthetic classification task: the class is the argmax of a fixed projection."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(samples, features, generator=generator)
    projection = torch.randn(features, classes, generator=generator)
    return TensorDataset(x, (x @ projection).argmax(dim=1))


def make_model(features: int = 32, classes: int = 4) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(features, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, classes),
    )


def train_torch(args: argparse.Namespace, url: str) -> tuple[Monitor, str]:
    from exporter.hooks.torch import TorchMonitor

    device = pick_device()
    loader = DataLoader(
        make_data(max(args.batch_size * 50, 1024)), batch_size=args.batch_size, shuffle=True, num_workers=args.workers, drop_last=True
    )
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    params = sum(p.numel() for p in model.parameters())
    # 6 x parameters x samples: forward and backward of a dense model, the usual estimate
    mon = TorchMonitor(args.job_name, url=url, device=device, flops_per_step=6 * params * args.batch_size)
    batches = iter(loader)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        with mon.step(samples=args.batch_size):
            with mon.phase("dataloader"):
                try:
                    x, y = next(batches)
                except StopIteration:  # next epoch
                    batches = iter(loader)
                    x, y = next(batches)
            with mon.phase("h2d"):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with mon.phase("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with mon.phase("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with mon.phase("optimizer"):
                optimizer.step()
            if step % args.log_every == 0:
                with mon.phase("d2h"):  # .item() waits for the device: only every few steps
                    value = loss.item()
                print(f"step {step:5d}  loss {value:.4f}  {step / (time.perf_counter() - start):.0f} steps/s", flush=True)
    return mon, str(device)


# --- the standard-library loop -----------------------------------------------------------------


def train_stdlib(args: argparse.Namespace, url: str) -> tuple[Monitor, str]:
    """A synthetic loop: each phase waits about as long as a small model's would."""
    rng = random.Random(0)
    # device 0: the simulated chip whose peak the MFU divides by (a real loop's comes from its rank)
    mon = Monitor(
        args.job_name, url=url, flops_per_step=SYNTHETIC_FLOPS, device=os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "0").split(",")[0]
    )
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        with mon.step(samples=args.batch_size):
            with mon.phase("data"):
                time.sleep(rng.uniform(0.001, 0.003))
            with mon.phase("h2d"):
                time.sleep(0.0005)
            with mon.phase("compute"):
                time.sleep(rng.uniform(0.004, 0.006))
            if step % args.log_every == 0:
                with mon.phase("d2h"):
                    time.sleep(0.0005)
                print(f"step {step:5d}  {step / (time.perf_counter() - start):.0f} steps/s", flush=True)
    return mon, "a synthetic loop (no PyTorch)"


# --- the exporter ------------------------------------------------------------------------------


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/healthz", timeout=2) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


@contextmanager
def exporter_at(url: str) -> Iterator[tuple[str, bool]]:
    """(``url``, False) when an exporter answers there, else (a temporary one on the simulator, True),
    stopped after."""
    if answers(url):
        yield url, False
        return
    print(f"no cann-exporter answers at {url}; starting a temporary one on the built-in simulator", flush=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--simulate",
            "--listen",
            "127.0.0.1:0",
            f"--npu-smi.peak-flops=910B3:bf16={EXAMPLE_PEAK:g}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield f"http://{listening_address(proc)}", True
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if the exporter has not left in STOP_WAIT seconds (it promises about
    10 s; a loaded machine can stretch that, and the example's results are already printed)."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print(f"the temporary exporter did not stop within {STOP_WAIT} s of SIGTERM; killed it", file=sys.stderr)


def listening_address(proc: subprocess.Popen) -> str:
    """The address from the exporter's "listening" log line (written after it bound the port)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        found = LISTENING.search(line)
        if found:
            # Keep reading its log, or a full pipe would block the exporter's next log line.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return found.group(1)
        if time.monotonic() > deadline:
            break
    raise SystemExit("the temporary exporter did not start")


def job_series(url: str, job_name: str, steps: int) -> list[str]:
    """The exporter's npu_job_* samples for this job (histogram buckets left out: too many to read).
    The exporter reads pushed steps about once a second: asked again until the last step shows,
    for a few seconds at most."""
    deadline = time.monotonic() + 5.0
    while True:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        series = [
            line
            for line in text.splitlines()
            if line.startswith("npu_job_") and f'job_name="{job_name}"' in line and "_bucket{" not in line
        ]
        counts = [float(line.rsplit(" ", 1)[1]) for line in series if line.startswith("npu_job_iterations_total{")]
        if sum(counts) >= steps or time.monotonic() > deadline:
            return series
        time.sleep(0.2)


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("CANN_EXPORTER_URL") or DEFAULT_URL,
        help="exporter URL (default: $CANN_EXPORTER_URL or %(default)s)",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "torch", "stdlib"),
        default="auto",
        help="auto: PyTorch when installed, else the synthetic standard-library loop",
    )
    parser.add_argument("--job-name", default="example-mlp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (PyTorch)")
    parser.add_argument("--log-every", type=int, default=50)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.backend == "torch" and torch is None:
        raise SystemExit("PyTorch is not installed: pip install torch==2.13.0, or use --backend stdlib")
    train = train_torch if args.backend != "stdlib" and torch is not None else train_stdlib
    with exporter_at(args.url) as (url, temporary):
        mon, where = train(args, url)
        mon.close()
        stats = mon.stats()
        print(
            f"done: {args.steps} steps on {where}; hook sent {stats['sent']}, dropped {stats['dropped']}"
            + (f" (last error: {stats['last_error']})" if stats["last_error"] else "")
        )
        series = job_series(url, args.job_name, args.steps)
        print(f"\n{url}/metrics serves these npu_job_* series for job_name={args.job_name!r} (and histogram buckets):")
        print("\n".join("  " + line for line in series))
    if temporary:
        print("\nThe temporary exporter has stopped. To keep one: `make run` in another terminal, then this again.")
    print(
        "Where to look: /metrics (npu_job_*), the Grafana dashboard grafana/dashboards/training-jobs.json,"
        " and `cann-exporter diagnose --metrics-url URL/metrics` for a verdict per job."
    )
    if not temporary:
        print(
            f"The job has ended: the exporter keeps its series for jobs.finished_ttl (60 s by default) after its"
            f" hook closed, so run diagnose now:\n  cann-exporter diagnose --metrics-url {url}/metrics"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
