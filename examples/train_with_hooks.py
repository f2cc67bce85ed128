"""Train a small PyTorch model with the cann-exporter training hook.

Start an exporter first (on a machine without an NPU it serves its simulator)::

    cann-exporter serve --simulate            # or: make run
    python examples/train_with_hooks.py --steps 500
    curl -s localhost:9435/metrics | grep npu_job_

Runs on an Ascend NPU when torch_npu is installed, on CUDA when available, else on the
CPU (`pip install torch==2.13.0` installs the CPU build). Each step is split into the
phases the exporter knows: data (next batch), h2d (copy to the device), compute
(forward, backward, optimizer) and d2h (reading the loss back, every --log-every steps).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:  # Ascend: registers torch.npu
    import torch_npu  # noqa: F401
except ImportError:
    pass

from exporter.hooks.torch import TorchMonitor


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
        torch.nn.Linear(features, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, classes),
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="exporter URL (default $CANN_EXPORTER_URL or http://127.0.0.1:9435)")
    parser.add_argument("--job-name", default="example-mlp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--log-every", type=int, default=50)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = pick_device()
    loader = DataLoader(make_data(max(args.batch_size * 50, 1024)), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True)
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    mon = TorchMonitor(args.job_name, url=args.url, device=device)

    batches = iter(loader)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        with mon.step(samples=args.batch_size):
            with mon.phase("data"):
                try:
                    x, y = next(batches)
                except StopIteration:  # next epoch
                    batches = iter(loader)
                    x, y = next(batches)
            with mon.phase("h2d"):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with mon.phase("compute"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            if step % args.log_every == 0:
                with mon.phase("d2h"):  # .item() waits for the device: only every few steps
                    value = loss.item()
                print(f"step {step:5d}  loss {value:.4f}  {step / (time.perf_counter() - start):.0f} steps/s", flush=True)
    mon.close()
    stats = mon.stats()
    print(f"done: {args.steps} steps on {device}; hook sent {stats['sent']}, dropped {stats['dropped']}"
          + (f" (last error: {stats['last_error']})" if stats["last_error"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
