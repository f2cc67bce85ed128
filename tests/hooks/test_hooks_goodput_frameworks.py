"""Goodput with no user code: a real transformers Trainer and a real Lightning run (CPU, tiny
models) that save checkpoints, crash, and resume from a checkpoint, each run in its own process
against a real exporter. The resumed run's repeated steps are lost progress, there is one
disruption, the restart takes over at once, and start-ups, checkpoints and the downtime show as
badput on /metrics."""

from __future__ import annotations

import pytest

from tests.support.hooks import ExporterProcess, run_script, wait_until

pytestmark = pytest.mark.e2e

KINDS = ("startup", "checkpoint_save", "checkpoint_restore", "lost_progress", "downtime", "idle")

HF_SCRIPT = """
import sys, torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from exporter.hooks.hf import CannExporterCallback

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
    def forward(self, x, labels=None):
        out = self.linear(x)
        return {{"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}}

class Crash(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == {crash_at}:
            raise RuntimeError("the node went away")

torch.manual_seed(0)
data = [{{"x": torch.randn(4), "labels": torch.randn(1)}} for _ in range(256)]
args = TrainingArguments(
    output_dir={out!r}, per_device_train_batch_size=4, max_steps=12, save_strategy="steps", save_steps=4,
    report_to="none", logging_strategy="no", use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
)
callbacks = [CannExporterCallback(url={url!r}, flush_interval=0.05), Crash()]
Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=callbacks).train(resume_from_checkpoint={resume!r})
"""

LIGHTNING_SCRIPT = """
import lightning, torch
from exporter.hooks.lightning import CannExporterCallback
from tests.support.hooks import tiny_lightning_module

class Crash(lightning.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == {crash_at}:
            raise RuntimeError("the node went away")

torch.manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(200, 4), torch.randn(200, 1))
checkpoints = lightning.pytorch.callbacks.ModelCheckpoint(dirpath={out!r}, every_n_train_steps=4, save_top_k=-1)
trainer = lightning.Trainer(
    max_steps=12, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
    default_root_dir={out!r}, callbacks=[CannExporterCallback(url={url!r}, flush_interval=0.05), Crash(), checkpoints],
)
trainer.fit(tiny_lightning_module(), torch.utils.data.DataLoader(data, batch_size=8), ckpt_path={resume!r})
"""


def goodput(exporter: ExporterProcess, job: str) -> dict[str, float]:
    found = exporter.samples()
    out: dict[str, float] = {}
    for (name, labels), v in found.items():
        ls = dict(labels)
        if ls.get("job_name") != job:
            continue
        if name == "npu_job_badput_seconds_total":
            out[ls["kind"]] = v
        elif name == "npu_job_goodput_seconds_total":
            out["goodput"] = v
        elif name == "npu_job_disruptions_total":
            out["disruptions"] = v
        elif name == "npu_job_iterations_total":
            out["iterations"] = v
        elif name == "npu_job_iteration_duration_seconds_sum":
            out["step_seconds"] = v
    return out


def crash_and_resume(exporter: ExporterProcess, script: str, job: str, out: str, checkpoint: str) -> dict[str, float]:
    env = {"CANN_EXPORTER_JOB_NAME": job, "RANK": "0", "WORLD_SIZE": "1"}
    first = run_script(script.format(url=exporter.url, out=out, crash_at=10, resume=None), env=env, timeout=240)
    assert first.returncode != 0 and "the node went away" in first.stderr, first.stderr[-3000:]
    wait_until(lambda: goodput(exporter, job).get("iterations") == 10, 20, "the crashed run's 10 steps on /metrics")
    crashed = goodput(exporter, job)
    second = run_script(script.format(url=exporter.url, out=out, crash_at=-1, resume=checkpoint), env=env, timeout=240)
    assert second.returncode == 0, second.stderr[-3000:]
    wait_until(lambda: goodput(exporter, job).get("disruptions") == 1 and goodput(exporter, job).get("iterations") == 4, 20, "resumed")
    found = goodput(exporter, job)
    # Steps 9 and 10 again: lost progress, about half of the resumed run's 4 steps (the rest is goodput).
    assert 0 < found["lost_progress"] < found["step_seconds"]
    assert found["goodput"] > crashed["goodput"]
    for kind in KINDS:
        assert found[kind] > 0, (kind, found)
    assert exporter.value("cann_exporter_ingest_takeovers_total", reason="pid_gone") == 1  # at once, not after 2 minutes
    assert (exporter.value("cann_exporter_ingest_rejected_total", reason="duplicate_rank") or 0) == 0
    return found


def test_a_transformers_trainer_that_crashes_and_resumes_shows_its_lost_work(start_exporter, tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    exporter = start_exporter()
    out = str(tmp_path / "hf")
    found = crash_and_resume(exporter, HF_SCRIPT, "hf-resume", out, f"{out}/checkpoint-8")
    assert found["disruptions"] == 1


def test_a_lightning_run_that_crashes_and_resumes_shows_its_lost_work(start_exporter, tmp_path):
    pytest.importorskip("lightning")
    exporter = start_exporter()
    out = str(tmp_path / "lit")
    found = crash_and_resume(exporter, LIGHTNING_SCRIPT, "lit-resume", out, f"{out}/epoch=0-step=8.ckpt")
    assert found["disruptions"] == 1
