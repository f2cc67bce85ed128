"""Who a report belongs to: the job-name precedence every adapter shares, and one process per
job_name and rank (a second live one is refused and says why; a restart starts afresh)."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from exporter.hooks import Monitor, resolve_identity
from exporter.hooks.identity import clean_label
from tests.support.hooks import tiny_lightning_module, wait_until

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "argument,env,run_name,expected",
    [
        ("explicit", {"CANN_EXPORTER_JOB_NAME": "launcher", "JOB_NAME": "sched"}, "run", "explicit"),
        (None, {"CANN_EXPORTER_JOB_NAME": "launcher", "JOB_NAME": "sched"}, "run", "launcher"),
        (None, {"JOB_NAME": "sched"}, "run", "sched"),
        (None, {}, "run", "run"),
        (None, {}, None, clean_label(os.path.splitext(os.path.basename(sys.argv[0]))[0] or "python", "job_")),
    ],
)
def test_job_name_precedence(argument, env, run_name, expected):
    assert resolve_identity(argument, env=env, run_name=run_name).job_name == expected


def test_the_transformers_trainer_keeps_the_launchers_job_name(sink, tmp_path, monkeypatch):
    """It served the job as `out`, the last part of output_dir, with CANN_EXPORTER_JOB_NAME set."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import torch
    from transformers import Trainer, TrainingArguments

    from exporter.hooks.hf import CannExporterCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            out = self.linear(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    def train(**callback_kwargs) -> None:
        args = TrainingArguments(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            max_steps=3,
            report_to="none",
            save_strategy="no",
            logging_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
        )
        data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(16)]
        callback = CannExporterCallback(url=sink.url, flush_interval=0.05, **callback_kwargs)
        Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[callback]).train()

    monkeypatch.setenv("CANN_EXPORTER_JOB_NAME", "bert-sft-run7")
    train()
    assert len(sink.steps(job_name="bert-sft-run7")) == 3 and not sink.steps(job_name="out")
    train(job_name="explicit")  # the argument still wins
    assert len(sink.steps(job_name="explicit")) == 3
    monkeypatch.delenv("CANN_EXPORTER_JOB_NAME")
    monkeypatch.delenv("JOB_NAME", raising=False)
    train()  # nothing else names it: the Trainer's run (its output directory)
    assert len(sink.steps(job_name="out")) == 3


def test_the_lightning_callback_follows_the_same_precedence(sink, tmp_path, monkeypatch):
    pytest.importorskip("lightning")
    import lightning
    import torch

    from exporter.hooks.lightning import CannExporterCallback

    def fit(job_name=None) -> None:
        data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
        trainer = lightning.Trainer(
            max_steps=2,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(tmp_path),
            callbacks=[CannExporterCallback(job_name, url=sink.url, flush_interval=0.05)],
        )
        trainer.fit(tiny_lightning_module(), torch.utils.data.DataLoader(data, batch_size=8))

    monkeypatch.setenv("CANN_EXPORTER_JOB_NAME", "vit-run3")
    fit()
    fit("explicit-lit")
    assert len(sink.steps(job_name="vit-run3")) == 2 and len(sink.steps(job_name="explicit-lit")) == 2


def test_a_second_live_process_on_one_job_name_and_rank_is_refused_and_says_why(start_exporter, caplog):
    exporter = start_exporter()
    key = {"job_name": "twin", "rank": "0"}
    first = Monitor("twin", url=exporter.url, flush_interval=0.05)
    second = Monitor("twin", url=exporter.url, flush_interval=0.05, max_backoff=0.2)
    with caplog.at_level(logging.WARNING, logger="exporter.hooks"):
        for _ in range(100):
            first.record_step(0.01)
        assert first.flush(10)
        for _ in range(60):
            second.record_step(0.01)
        wait_until(lambda: second.stats()["send_errors"] >= 3, what="the second process refused repeatedly")
        exporter.wait_value("npu_job_iterations_total", 100, **key)  # /metrics is refreshed about once a second
        assert exporter.value("npu_job_iterations_total", **key) == 100  # never 200
        wait_until(
            lambda: (exporter.value("cann_exporter_ingest_rejected_total", reason="duplicate_rank") or 0) >= 3, what="refusals counted"
        )
        refusals = [r for r in caplog.records if "held by another live process" in r.getMessage()]
        assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING  # said once, not per retry
        assert second.stats()["buffered"] == 60  # kept, not dropped: the holder may be gone soon
        first.close()  # a clean finish: the second takes over with fresh counters
        exporter.wait_value("npu_job_iterations_total", 60, **key)  # fresh counters, not 160
        wait_until(lambda: second.stats()["sent"] == 60, what="the second process's steps acknowledged")
        second.close()
    assert exporter.value("npu_job_info", pid=str(os.getpid()), **key) == 1
