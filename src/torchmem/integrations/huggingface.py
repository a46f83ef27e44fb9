"""``TorchmemTrainerCallback``: the doctor inside a Hugging Face ``transformers.Trainer``.

.. code-block:: python

    from torchmem.integrations.huggingface import TorchmemTrainerCallback

    trainer = transformers.Trainer(model=model, args=args, train_dataset=train,
                                   callbacks=[TorchmemTrainerCallback()])
    trainer.train()

What it does, per ``TrainerCallback`` event:

* ``on_train_begin``: starts a :class:`torchmem.DoctorSession` over the training steps
  (culprits are searched in the model, named ``model``, and in the variables of the code
  that called ``trainer.train()``) and the ``train`` phase's tracker.
* ``on_step_end``: one optimizer step: the doctor's per-step reading and, at its usual
  boundaries (steps 2, 3, 4, 6, 8...), its analysis.
* evaluation and prediction get their own peaks (phases ``eval`` and ``predict``): the
  phase starts at the ``on_step_end``/``on_epoch_end`` after which the trainer evaluates
  (``control.should_evaluate``), or at the first ``on_prediction_step`` of an
  ``evaluate()``/``predict()`` called by hand, and ends at ``on_evaluate``/``on_predict``.
* ``on_log``: adds ``torchmem/live_bytes``, ``torchmem/peak_bytes``,
  ``torchmem/growth_per_step`` and ``torchmem/<phase>_peak_bytes`` to the logs (the
  trainer's ``state.log_history`` and the callbacks after this one, such as reporters
  added with ``trainer.add_callback`` after it, see them); ``torchmem/train_peak_bytes``
  joins the trainer's last entry (its ``train_runtime`` summary) at ``on_train_end``.
* ``on_train_end``: finishes the session and writes the capture (``torchmem report``
  renders it) to ``capture_path``, by default ``<args.output_dir>/torchmem.json``; the
  findings are logged as a warning through ``transformers``' logger. Only the world
  process zero writes and reports.

``pip install 'torchmem[hf]'``. Cost: see :mod:`torchmem.integrations._trainer`.
Training gives the same parameters with and without the callback.

Known limitations:
    * Reporters placed before this callback (``report_to`` integrations are) log before it
      adds its figures: they find them in ``trainer.state.log_history`` and the next logs.
    * An ``evaluate()``/``predict()`` called by hand starts its phase at the first
      prediction step: the peak of that first batch's forward is not in the phase's peak.
    * One :class:`torchmem.DoctorSession` can run in a process at a time. When ``train()``
      raises, ``on_train_end`` never comes: the session (and the CPU tracker) stay until
      ``callback.close()`` or the next ``on_train_begin`` of any
      ``TorchmemTrainerCallback`` ends them.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from transformers import TrainerCallback
    from transformers.utils import logging as _hf_logging
except ImportError:  # pragma: no cover - depends on what is installed
    raise ImportError("torchmem.integrations.huggingface needs transformers; expected the "
                      "'transformers' package, got none. Install it with: "
                      "pip install 'torchmem[hf]'") from None

from torchmem.integrations._trainer import PhasePeak, TrainerMonitor

__all__ = ["TorchmemTrainerCallback"]

_logger = _hf_logging.get_logger(__name__)

#: monitors whose training never reached ``on_train_end`` (``train()`` raised): the next
#: ``on_train_begin`` finishes them, so that their session does not outlive the training
_unfinished: list[TrainerMonitor] = []


class TorchmemTrainerCallback(TrainerCallback):
    """Measure and diagnose memory inside a ``transformers.Trainer`` (see the module docstring).

    Args:
        capture_path: where to write the capture JSON (default
            ``<args.output_dir>/torchmem.json``; ``False`` writes nothing).
        deep: the doctor's analysis of what the model and the caller hold (False: the
            per-step readings and the growth verdict only).
        phase_peaks: track the peak of each phase (on the CPU one Python call per aten op).
        device: device to track (default: the current accelerator once initialised,
            else the CPU).
        report: log the findings as a warning at the end of training.

    Attributes:
        capture: the :class:`~torchmem.model.capture.Capture` of the last training run.
        capture_file: where it was written (None if not written).
        phase_peaks: ``{phase: PhasePeak}`` (``train``, ``eval``, ``predict``).
    """

    def __init__(self, capture_path: str | os.PathLike[str] | bool | None = None, *,
                 deep: bool = True, phase_peaks: bool = True, device: str | None = None,
                 report: bool = True) -> None:
        self.capture_path = capture_path
        self.deep = deep
        self.device = device
        self.report = report
        self._phase_peaks = phase_peaks
        self._monitor: TrainerMonitor | None = None
        self._pending: dict[str, float] = {}
        self._open: str | None = None  # the eval/predict phase being tracked
        self.capture: Any = None
        self.capture_file: str | None = None
        self.phase_peaks: dict[str, PhasePeak] = {}

    def _new_monitor(self) -> TrainerMonitor:
        return TrainerMonitor("torchmem huggingface", deep=self.deep,
                              phase_peaks=self._phase_peaks, device=self.device)

    # -- training -------------------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       **kwargs: Any) -> None:
        while _unfinished:
            _unfinished.pop().end(None)  # a train() that raised: its session ends here
        self._open = None
        self._monitor = self._new_monitor()
        self._monitor.begin({"model": model}, label="huggingface train")
        self._monitor.phase_begin("train")
        _unfinished.append(self._monitor)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        monitor = self._monitor
        if monitor is None or not monitor.in_session:
            return
        figures = monitor.step()
        if getattr(control, "should_log", False):  # the trainer logs right after this step
            rate = monitor.growth_per_step()
            if rate is not None:
                figures["torchmem/growth_per_step"] = float(rate)
            self._pending.update(figures)
        if getattr(control, "should_evaluate", False):
            self._phase_begin("eval")

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(control, "should_evaluate", False):
            self._phase_begin("eval")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        monitor = self._monitor
        if monitor is None or not monitor.in_session:
            return
        self._phase_end(self._open)
        self._keep(monitor.phase_end("train"))
        self._monitor = None
        if monitor in _unfinished:
            _unfinished.remove(monitor)
        history = getattr(state, "log_history", None)
        if self._pending and history and isinstance(history[-1], dict):
            # the trainer logged its summary (train_runtime...) just before this event
            history[-1].update(self._pending)
            self._pending = {}
        zero = bool(getattr(state, "is_world_process_zero", True))
        path = self._path(args)
        self.capture = monitor.end(path if zero else None)
        self.capture_file = path if zero and path is not None and os.path.exists(path) else None
        if zero and self.report:
            _logger.warning(monitor.report())

    def close(self) -> None:
        """End what a ``train()`` that raised left running (its session, its trackers)
        without writing a capture; ``callback.capture`` then holds what was measured."""
        monitor, self._monitor, self._open = self._monitor, None, None
        if monitor is not None:
            if monitor in _unfinished:
                _unfinished.remove(monitor)
            self.capture = monitor.end(None)

    def _path(self, args: Any) -> str | None:
        if self.capture_path is False:
            return None
        if self.capture_path is None or self.capture_path is True:
            return os.path.join(str(getattr(args, "output_dir", None) or "."), "torchmem.json")
        return os.fspath(self.capture_path)

    # -- evaluation and prediction ------------------------------------------------------------
    def _phase_begin(self, phase: str) -> None:
        if self._open is not None:
            return
        if self._monitor is None:  # evaluate()/predict() outside training: phases only
            self._monitor = self._new_monitor()
        self._monitor.phase_begin(phase)
        self._open = phase

    def _phase_end(self, name: str | None) -> None:
        """End the open eval/predict phase, recorded under ``name``."""
        opened, self._open = self._open, None
        if self._monitor is not None and opened is not None and name is not None:
            self._keep(self._monitor.phase_end(opened, name))

    def _keep(self, peak: PhasePeak | None) -> None:
        if peak is not None:
            self.phase_peaks[peak.phase] = peak
            self._pending[f"torchmem/{peak.phase}_peak_bytes"] = float(peak.peak)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._open is None:
            self._phase_begin("eval")  # named at its end: eval or predict

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._phase_end("eval")

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None,
                   **kwargs: Any) -> None:
        self._phase_end("predict")

    # -- logging --------------------------------------------------------------------------------
    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
               **kwargs: Any) -> None:
        if not self._pending:
            return
        figures, self._pending = self._pending, {}
        if isinstance(logs, dict):
            logs.update(figures)
        history = getattr(state, "log_history", None)
        if history and isinstance(history[-1], dict) and \
                history[-1].get("step") == getattr(state, "global_step", None):
            history[-1].update(figures)
