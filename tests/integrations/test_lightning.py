"""``TorchmemCallback`` in a real Lightning ``Trainer`` fitting a tiny real module on the CPU."""

from __future__ import annotations

import csv
import inspect
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
try:
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger
except ImportError:  # the standalone package
    pl = pytest.importorskip("pytorch_lightning")
    from pytorch_lightning.loggers import CSVLogger

from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torchmem.integrations.lightning import TorchmemCallback  # noqa: E402
from torchmem.model.capture import Capture  # noqa: E402
from torchmem.units import MiB  # noqa: E402

pytestmark = [  # Lightning's own notices about this tiny setup
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no"),
    pytest.mark.filterwarnings("ignore:.*isinstance\\(treespec, LeafSpec\\)"),
]


class Regressor(pl.LightningModule):
    """A 16-32-1 MLP; ``keep`` says what ``training_step`` keeps of each loss."""

    def __init__(self, keep: str = "number") -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 1))
        self.keep = keep
        self.losses: list = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = (self.net(x) - y).pow(2).mean()
        if self.keep == "graph":
            self.losses.append(loss)
        else:
            self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return (self.net(x) - y).pow(2).mean()

    def test_step(self, batch, batch_idx):
        return self.validation_step(batch, batch_idx)

    def predict_step(self, batch, batch_idx):
        scratch = torch.ones(1024, 1024)  # 4 MiB, freed at once: the predict peak sees it
        return self.net(batch[0]) + scratch.sum() * 0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _loader(n: int = 256, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(torch.randn(n, 16, generator=g), torch.randn(n, 1, generator=g)),
                      batch_size=16)


def _trainer(tmp_path: Path, callbacks: list, steps: int = 16, **kwargs) -> pl.Trainer:
    return pl.Trainer(max_steps=steps, accelerator="cpu", devices=1,
                      logger=CSVLogger(str(tmp_path), name="logs"), enable_progress_bar=False,
                      enable_checkpointing=False, enable_model_summary=False,
                      num_sanity_val_steps=0, log_every_n_steps=4, callbacks=callbacks, **kwargs)


def _line(cls: type, code: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, ln in enumerate(lines) if ln.strip() == code)


def test_a_module_keeping_its_losses_is_named_with_its_line_and_fix(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Regressor(keep="graph")
    callback = TorchmemCallback(report=False)
    trainer = _trainer(tmp_path, [callback], limit_val_batches=2, val_check_interval=8)
    trainer.fit(model, _loader(), _loader(64, seed=1))

    findings = callback.capture.findings
    assert [f.culprit.name for f in findings] == ["model.losses"]
    finding = findings[0]
    assert finding.cause == "retained_graph"
    assert finding.culprit.file == __file__
    assert finding.culprit.line == _line(Regressor, "self.losses.append(loss)")
    assert "`self.losses.append(loss.item())`" in finding.fix
    assert finding.data["grad_tensors"] == finding.data["items"] > 0  # every item has a graph

    # the capture: written under the logger's directory, readable by `torchmem report`
    path = Path(trainer.log_dir) / "torchmem-fit.json"
    assert callback.capture_file == str(path)
    capture = Capture.load(path)
    assert capture.tool == "torchmem lightning"
    assert len(capture.steps) == 16
    assert [f.culprit.name for f in capture.findings] == ["model.losses"]
    # each step keeps one more float32 scalar: exactly 4 bytes of live tensors per step
    assert "live tensor bytes change by +4 B per step (over 16 steps)" in capture.notes

    # per-phase peaks, and the figures in the trainer's logger
    assert set(callback.phase_peaks) == {"train", "validation"}
    assert callback.phase_peaks["validation"].runs == 2
    assert callback.phase_peaks["train"].peak >= callback.phase_peaks["train"].above_start > 0
    with open(Path(trainer.log_dir) / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    logged = {k for row in rows for k, v in row.items() if v}
    assert {"torchmem/live_bytes", "torchmem/peak_bytes", "torchmem/growth_per_step",
            "torchmem/train_peak_bytes", "torchmem/validation_peak_bytes"} <= logged
    rates = [float(r["torchmem/growth_per_step"]) for r in rows if r["torchmem/growth_per_step"]]
    assert rates and rates[-1] == 4.0


def test_a_healthy_module_has_no_findings(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Regressor(keep="number")
    callback = TorchmemCallback(report=False)
    _trainer(tmp_path, [callback]).fit(model, _loader())
    capture = callback.capture
    assert capture.findings == ()
    assert len(capture.steps) == 16
    assert not [n for n in capture.notes if n.startswith("analysis incomplete")], capture.notes
    assert "live tensor bytes change by +0 B per step (over 16 steps)" in capture.notes


def test_test_and_predict_get_their_own_peaks_and_captures(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Regressor()
    callback = TorchmemCallback(capture_path=tmp_path / "tm-{stage}.json", report=False)
    trainer = _trainer(tmp_path, [callback])
    trainer.test(model, _loader(64))
    assert set(callback.phase_peaks) == {"test"}
    assert Capture.load(tmp_path / "tm-test.json").steps == ()
    trainer.predict(model, _loader(64))
    predict = callback.phase_peaks["predict"]
    assert predict.above_start >= 4 * MiB  # the 4 MiB scratch tensor of predict_step
    assert (tmp_path / "tm-predict.json").exists()


def test_training_with_the_callback_gives_bit_identical_parameters(tmp_path: Path) -> None:
    def fit(callbacks: list) -> dict:
        torch.manual_seed(0)
        model = Regressor()
        _trainer(tmp_path, callbacks, steps=12).fit(model, _loader())
        return {k: v.clone() for k, v in model.state_dict().items()}

    plain = fit([])
    measured = fit([TorchmemCallback(report=False, capture_path=False)])
    assert plain.keys() == measured.keys()
    assert all(torch.equal(plain[k], measured[k]) for k in plain)


class Exploding(Regressor):
    def training_step(self, batch, batch_idx):
        if batch_idx == 3:
            raise RuntimeError("boom at step 4")
        return super().training_step(batch, batch_idx)


def test_a_failed_fit_leaves_nothing_running_and_still_writes_its_capture(tmp_path: Path) -> None:
    from torchmem.doctor.session import DoctorSession

    callback = TorchmemCallback(capture_path=tmp_path / "fit.json", report=False)
    with pytest.raises(RuntimeError, match="boom at step 4"):
        _trainer(tmp_path, [callback]).fit(Exploding(), _loader())
    assert torch._C._len_torch_dispatch_stack() == 0  # the phase trackers ended
    capture = Capture.load(tmp_path / "fit.json")
    assert len(capture.steps) == 3
    assert capture.outcome == "exception" and "boom at step 4" in (capture.error or "")
    DoctorSession(namespace={}).start().finish()  # the session ended: a new one starts
