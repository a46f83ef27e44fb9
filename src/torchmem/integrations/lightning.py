"""``TorchmemCallback``: the doctor inside a Lightning ``Trainer``.

.. code-block:: python

    from torchmem.integrations.lightning import TorchmemCallback

    trainer = lightning.Trainer(max_epochs=3, callbacks=[TorchmemCallback()])
    trainer.fit(model, train_loader, val_loader)

What it does, per hook:

* ``setup("fit")``: starts a :class:`torchmem.DoctorSession` over the training steps
  (culprits are searched in the LightningModule, named ``model``, and in the variables of
  the code that called ``trainer.fit``).
* ``on_train_batch_end``: one step: the doctor's per-step reading and, at its usual
  boundaries (steps 2, 3, 4, 6, 8...), its analysis. Every ``log_every_n_steps`` steps the
  figures ``torchmem/live_bytes``, ``torchmem/peak_bytes`` and
  ``torchmem/growth_per_step`` go to ``trainer.loggers``.
* ``on_{train,validation,test,predict}_start/_end``: each phase gets its own peak
  (``torchmem/<phase>_peak_bytes`` is logged when the phase ends; the sanity check is not
  a phase); ``callback.phase_peaks`` holds them.
* ``teardown``: finishes the session and writes the capture (``torchmem report`` renders
  it) to ``capture_path`` (``{stage}`` is replaced by ``fit``, ``validate``, ``test`` or
  ``predict``), by default ``<trainer.log_dir>/torchmem-{stage}.json``; the findings are
  reported with ``rank_zero_warn``. Only the global-zero process writes and reports.
* ``on_exception``: Lightning calls no ``teardown`` after an exception, so the same
  happens here, and the capture records the exception (an out-of-memory error is
  explained as ``torchmem doctor`` explains it).

It imports ``lightning`` (the ``lightning.pytorch`` namespace), or ``pytorch_lightning``
when that is what is installed; ``pip install 'torchmem[lightning]'``.

Cost: see :mod:`torchmem.integrations._trainer` (per step tens of microseconds; the deep
analysis at about ``2 * log2(steps)`` steps; with ``phase_peaks`` on the CPU one Python
call per aten op). Training gives the same parameters with and without the callback.

Known limitations:
    * One :class:`torchmem.DoctorSession` can run in a process at a time: a second
      callback (or a session of your own) runs without findings and says so in its notes.
    * A step is one training batch: with gradient accumulation several batches make one
      optimizer step.
"""

from __future__ import annotations

import os
from typing import Any

try:  # the unified package first, the standalone one otherwise
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.utilities import rank_zero_warn
except ImportError:  # pragma: no cover - depends on what is installed
    try:
        from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
        from pytorch_lightning.utilities import rank_zero_warn  # type: ignore[no-redef]
    except ImportError:
        raise ImportError("torchmem.integrations.lightning needs Lightning; expected the "
                          "'lightning' or 'pytorch_lightning' package, got neither. Install "
                          "it with: pip install 'torchmem[lightning]'") from None

from torchmem.integrations._trainer import PhasePeak, TrainerMonitor

__all__ = ["TorchmemCallback"]


def _log_dir(trainer: Any) -> str:
    """``trainer.log_dir`` without its broadcast (only this process writes, and after an
    exception the other processes may not be there to answer)."""
    try:
        loggers = list(getattr(trainer, "loggers", None) or ())
        if loggers:
            first = loggers[0]
            found = getattr(first, "log_dir", None) or getattr(first, "save_dir", None)
            if found:
                return str(found)
    except Exception:  # noqa: BLE001 - a logger without a directory
        pass
    return str(getattr(trainer, "default_root_dir", None) or ".")


def _stage(stage: Any) -> str:
    """``"fit"`` for ``"fit"`` and for ``TrainerFn.FITTING`` (a str enum)."""
    return str(getattr(stage, "value", stage))


class TorchmemCallback(Callback):
    """Measure and diagnose memory inside a Lightning ``Trainer`` (see the module docstring).

    Args:
        capture_path: where to write the capture JSON; ``{stage}`` is replaced by the
            trainer's stage. Default: ``<trainer.log_dir>/torchmem-{stage}.json``.
            ``False`` writes nothing.
        deep: the doctor's analysis of what the model and the caller hold (False: the
            per-step readings and the growth verdict only).
        phase_peaks: track the peak of each phase (see the cost above).
        device: device to track (default: the current accelerator once initialised,
            else the CPU).
        report: report the findings with ``rank_zero_warn`` at the end.

    Attributes:
        capture: the last stage's :class:`~torchmem.model.capture.Capture`.
        capture_file: where it was written (None if not written).
        phase_peaks: ``{phase: PhasePeak}`` of the last stage.
    """

    def __init__(self, capture_path: str | os.PathLike[str] | bool | None = None, *,
                 deep: bool = True, phase_peaks: bool = True, device: str | None = None,
                 report: bool = True) -> None:
        super().__init__()
        self.capture_path = capture_path
        self.deep = deep
        self.device = device
        self.report = report
        self._phase_peaks = phase_peaks
        self._monitor: TrainerMonitor | None = None
        self.capture: Any = None
        self.capture_file: str | None = None
        self.phase_peaks: dict[str, PhasePeak] = {}

    # -- stages ------------------------------------------------------------------------------
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        stage = _stage(stage)
        self._monitor = TrainerMonitor("torchmem lightning", deep=self.deep,
                                       phase_peaks=self._phase_peaks, device=self.device)
        if stage == "fit":
            self._monitor.begin({"model": pl_module}, label=f"lightning {stage}")

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._end_stage(trainer, _stage(stage), None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning calls no teardown after an exception: end everything here, so that the
        # trackers (and the CPU dispatch mode) and the session are gone, and write the
        # capture of what ran
        fn = getattr(getattr(trainer, "state", None), "fn", None)
        self._end_stage(trainer, _stage(fn) if fn else "fit", exception)

    def _end_stage(self, trainer: Any, stage: str, exc: BaseException | None) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is None:
            return
        path = self._path(trainer, stage)
        zero = bool(getattr(trainer, "is_global_zero", True))
        self.capture = monitor.end(path if zero else None, exc)
        self.capture_file = str(path) if zero and path is not None and os.path.exists(path) else None
        self.phase_peaks = dict(monitor.phase_peaks)
        if zero and self.report:
            rank_zero_warn(monitor.report())

    def _path(self, trainer: Any, stage: str) -> str | None:
        if self.capture_path is False:
            return None
        if self.capture_path is None or self.capture_path is True:
            return os.path.join(_log_dir(trainer), f"torchmem-{stage}.json")
        return os.fspath(self.capture_path).replace("{stage}", stage)

    # -- steps ---------------------------------------------------------------------------------
    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        monitor = self._monitor
        if monitor is None:
            return
        figures = monitor.step()
        every = max(int(getattr(trainer, "log_every_n_steps", 50) or 50), 1)
        if figures and monitor.steps % every == 0:
            rate = monitor.growth_per_step()
            if rate is not None:
                figures["torchmem/growth_per_step"] = float(rate)
            self._log(trainer, figures)

    # -- phases --------------------------------------------------------------------------------
    def _begin(self, trainer: Any, phase: str) -> None:
        if self._monitor is not None and not getattr(trainer, "sanity_checking", False):
            self._monitor.phase_begin(phase)

    def _end(self, trainer: Any, phase: str) -> None:
        if self._monitor is None or getattr(trainer, "sanity_checking", False):
            return
        peak = self._monitor.phase_end(phase)
        if peak is not None:
            self._log(trainer, {f"torchmem/{phase}_peak_bytes": float(peak.peak)})

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin(trainer, "train")

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._end(trainer, "train")

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin(trainer, "validation")

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._end(trainer, "validation")

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin(trainer, "test")

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._end(trainer, "test")

    def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin(trainer, "predict")

    def on_predict_end(self, trainer: Any, pl_module: Any) -> None:
        self._end(trainer, "predict")

    # -- logging -------------------------------------------------------------------------------
    def _log(self, trainer: Any, figures: dict[str, float]) -> None:
        if not figures:
            return
        step = int(getattr(trainer, "global_step", 0) or 0)
        for logger in getattr(trainer, "loggers", None) or ():
            try:
                logger.log_metrics(figures, step=step)
            except Exception as err:  # noqa: BLE001 - a logger's failure is not training's
                if self._monitor is not None:
                    self._monitor.note("logging", err)
