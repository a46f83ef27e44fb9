"""``TorchmemTrainerCallback`` in a real ``transformers.Trainer`` with a tiny model built here."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # transformers' Trainer needs it

from torchmem.integrations.huggingface import TorchmemTrainerCallback  # noqa: E402
from torchmem.model.capture import Capture  # noqa: E402


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


class TinyRegressor(torch.nn.Module):
    """A 16-32-1 MLP returning ``{"loss", "logits"}`` as transformers models do."""

    def __init__(self, keep_graphs: bool = False) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))
        self.keep_graphs = keep_graphs
        self.losses: list = []

    def forward(self, x, labels=None):
        out = self.net(x)
        loss = (out - labels).pow(2).mean()
        if self.training:
            if self.keep_graphs:
                self.losses.append(loss)
            else:
                self.losses.append(loss.item())
        return {"loss": loss, "logits": out}


def _args(tmp_path: Path, steps: int = 16, **kwargs) -> transformers.TrainingArguments:
    return transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=steps, per_device_train_batch_size=8,
        per_device_eval_batch_size=8, learning_rate=0.05, report_to=[], use_cpu=True,
        logging_steps=4, save_strategy="no", disable_tqdm=True, seed=0, **kwargs)


def _line(cls: type, code: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, ln in enumerate(lines) if ln.strip() == code)


def test_a_model_keeping_its_losses_is_named_with_its_line_and_fix(tmp_path: Path) -> None:
    model = TinyRegressor(keep_graphs=True)
    callback = TorchmemTrainerCallback(report=False)
    trainer = transformers.Trainer(
        model=model, args=_args(tmp_path, eval_strategy="steps", eval_steps=8),
        train_dataset=Pairs(256), eval_dataset=Pairs(32, seed=1), callbacks=[callback])
    trainer.train()

    findings = callback.capture.findings
    assert [f.culprit.name for f in findings] == ["model.losses"]
    finding = findings[0]
    assert finding.cause == "retained_graph"
    assert finding.culprit.file == __file__
    assert finding.culprit.line == _line(TinyRegressor, "self.losses.append(loss)")
    assert "`self.losses.append(loss.item())`" in finding.fix

    path = tmp_path / "torchmem.json"
    assert callback.capture_file == str(path)
    capture = Capture.load(path)
    assert capture.tool == "torchmem huggingface"
    assert len(capture.steps) == 16
    # each optimizer step keeps one more float32 scalar: 4 bytes of live tensors per step
    assert "live tensor bytes change by +4 B per step (over 16 steps)" in capture.notes

    assert set(callback.phase_peaks) == {"train", "eval"}
    assert callback.phase_peaks["eval"].runs == 2  # evaluated at steps 8 and 16
    # the figures are in the trainer's own log history (and trainer_state.json)
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"torchmem/live_bytes", "torchmem/peak_bytes", "torchmem/growth_per_step",
            "torchmem/eval_peak_bytes", "torchmem/train_peak_bytes"} <= logged
    rates = [e["torchmem/growth_per_step"] for e in trainer.state.log_history
             if "torchmem/growth_per_step" in e]
    assert rates[-1] == 4.0
    json.dumps(trainer.state.log_history)  # still plain JSON


def test_a_healthy_model_has_no_findings(tmp_path: Path) -> None:
    callback = TorchmemTrainerCallback(report=False)
    trainer = transformers.Trainer(model=TinyRegressor(), args=_args(tmp_path),
                                   train_dataset=Pairs(256), callbacks=[callback])
    trainer.train()
    capture = callback.capture
    assert capture.findings == ()
    assert not [n for n in capture.notes if n.startswith("analysis incomplete")], capture.notes
    # evaluate() and predict() by hand, after training: phases of their own
    trainer.evaluate(Pairs(32, seed=1))
    trainer.predict(Pairs(16, seed=2))
    assert {"train", "eval", "predict"} <= set(callback.phase_peaks)


def test_training_with_the_callback_gives_bit_identical_parameters(tmp_path: Path) -> None:
    def train(callbacks: list) -> dict:
        torch.manual_seed(0)
        model = TinyRegressor()
        transformers.Trainer(model=model, args=_args(tmp_path, steps=12),
                             train_dataset=Pairs(256), callbacks=callbacks).train()
        return {k: v.clone() for k, v in model.state_dict().items()}

    plain = train([])
    measured = train([TorchmemTrainerCallback(report=False, capture_path=False)])
    assert plain.keys() == measured.keys()
    assert all(torch.equal(plain[k], measured[k]) for k in plain)


class Exploding(TinyRegressor):
    def forward(self, x, labels=None):
        if len(self.losses) == 3:
            raise RuntimeError("boom at step 4")
        return super().forward(x, labels)


def test_close_ends_what_a_failed_train_left_running(tmp_path: Path) -> None:
    from torchmem.doctor.session import DoctorSession

    callback = TorchmemTrainerCallback(report=False)
    trainer = transformers.Trainer(model=Exploding(), args=_args(tmp_path),
                                   train_dataset=Pairs(64), callbacks=[callback])
    with pytest.raises(RuntimeError, match="boom at step 4"):
        trainer.train()  # transformers calls no callback on the way out
    assert torch._C._len_torch_dispatch_stack() == 1  # the train phase's CPU tracker
    callback.close()
    assert torch._C._len_torch_dispatch_stack() == 0
    assert len(callback.capture.steps) == 3
    DoctorSession(namespace={}).start().finish()  # the session is gone: a new one starts
    assert not (tmp_path / "torchmem.json").exists()
