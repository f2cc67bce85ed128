"""The transformers, Lightning and MindSpore adapters, each on a tiny real model on the CPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.hooks import ROOT, tiny_lightning_module


def profiling_of(module, monkeypatch) -> list:
    """The profiling windows of every TorchMonitor ``module``'s callback builds (its every, steps)."""
    built = []

    class Recording(module.TorchMonitor):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            built.append((self._profiling.every, self._profiling.steps) if self._profiling else None)

    monkeypatch.setattr(module, "TorchMonitor", Recording)
    return built


def test_transformers_trainer_callback(sink, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import torch
    from transformers import Trainer, TrainingArguments

    from exporter.hooks import hf
    from exporter.hooks.hf import CannExporterCallback

    built = profiling_of(hf, monkeypatch)

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.linear(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(64)]
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf-run"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=5,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    callback = CannExporterCallback(url=sink.url, flush_interval=0.05, profile_every=0.01, profile_steps=2)
    Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[callback]).train()
    steps = sink.steps(job_name="hf-run")
    assert len(steps) == 5
    assert all(s["samples"] == 8 and s["duration"] > 0 for s in steps)
    assert sink.batches[-1]["framework"] == "transformers" and sink.batches[-1]["final"]
    assert built == [(0.01, 2)]  # profiling windows passed through (end to end: test_hooks_profiling.py)


def test_lightning_callback(sink, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("lightning")
    import lightning
    import torch

    from exporter.hooks import lightning as adapter
    from exporter.hooks.lightning import CannExporterCallback, batch_size

    built = profiling_of(adapter, monkeypatch)

    data = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.randn(40, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    trainer = lightning.Trainer(
        max_steps=7,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[CannExporterCallback("lit", url=sink.url, flush_interval=0.05, profile_every=0.01, profile_steps=2)],
    )
    trainer.fit(tiny_lightning_module(), loader)
    steps = sink.steps(job_name="lit")
    assert len(steps) == 7
    assert [s["samples"] for s in steps] == [8, 8, 8, 8, 8, 8, 8]
    assert sink.batches[-1]["framework"] == "lightning"
    assert built == [(0.01, 2)]
    assert batch_size({"a": "text", "b": torch.zeros(3, 2)}) == 3 and batch_size(7) is None


MINDSPORE_SCRIPT = """
import numpy as np
import mindspore.dataset as ds
from mindspore import nn
from mindspore.train import Model
from exporter.hooks.mindspore import CannExporterCallback

x = np.random.randn(48, 4).astype(np.float32)
y = x.sum(axis=1, keepdims=True).astype(np.float32)
data = ds.NumpySlicesDataset({{"x": x, "y": y}}, shuffle=False).batch(8)
net = nn.Dense(4, 1)
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.01))
model.train(2, data, callbacks=[CannExporterCallback("ms", url="{url}", flush_interval=0.05)], dataset_sink_mode=False)
"""


@pytest.mark.skipif(importlib.util.find_spec("mindspore") is None, reason="MindSpore is not installed")
def test_mindspore_callback(sink):
    # Its own interpreter: MindSpore and PyTorch are not loaded into one process.
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MINDSPORE_SCRIPT.format(url=sink.url))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RANK_ID": "0", "RANK_SIZE": "1", "GLOG_v": "3"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = sink.steps(job_name="ms")
    assert len(steps) == 12 and all(s["samples"] == 8 for s in steps)
    assert sink.batches[-1]["framework"] == "mindspore" and sink.batches[-1]["final"]
