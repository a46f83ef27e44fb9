"""``torchmem.compare_modes``: forward-pass memory under grad, ``no_grad`` and ``inference_mode``.

Each mode is *measured* with a :class:`torchmem.Tracker` around one forward pass (after
one untimed warm-up pass under ``no_grad``, so that one-time allocations do not land
on the first row). For every mode the row gives the peak during the forward, what is
still alive afterwards while the outputs are held, the bytes autograd saved for
backward (walked from the outputs' graph), and the wall time.

What the comparison shows, and what it does not: a plain forward keeps the
*activations autograd saves for backward* alive for as long as the output (or loss)
lives; ``no_grad`` does not record the graph, so intermediates are freed as soon as the
next op has used them. That is the memory difference: it is *not* "gradients" (no
gradient exists before ``backward()``), and it is not a fixed "2x". ``inference_mode``
additionally skips version counters and view metadata; in memory it usually equals
``no_grad`` and its gain is speed, at the price of tensors that can never enter
autograd later.

Known limitations:
    * The model runs four times (warm-up + three modes) in its current train/eval
      state: in train mode, dropout draws random numbers and batch-norm running
      statistics are updated each time. Call ``model.eval()`` first if that matters.
    * On the CPU the figures come from the storage engine: scratch buffers inside a
      kernel are not seen (see :mod:`torchmem.collect.tracker`).
"""

from __future__ import annotations

import contextlib
import gc
import time
from typing import Any, Callable, Iterator

import torch

from torchmem.collect.graph import storage_key, storage_nbytes, walk
from torchmem.collect.readings import DeviceLike, resolve_device
from torchmem.collect.tracker import Tracker
from torchmem.errors import UsageError
from torchmem.model.readings import ModeComparison, ModeRow
from torchmem.units import format_bytes

__all__ = ["compare_modes", "MODES"]

#: the modes measured, in row order
MODES: tuple[str, ...] = ("grad", "no_grad", "inference_mode")


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _mode(name: str) -> contextlib.AbstractContextManager[Any]:
    if name == "no_grad":
        return torch.no_grad()
    if name == "inference_mode":
        return torch.inference_mode()
    return torch.enable_grad()


def _caller(model: Callable[..., Any], inputs: Any) -> Callable[[], Any]:
    if isinstance(inputs, dict):
        return lambda: model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return lambda: model(*inputs)
    return lambda: model(inputs)


def _infer_device(model: Any, inputs: Any) -> str:
    for t in _tensors(inputs):
        return resolve_device(t.device)
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            return resolve_device(p.device)
    return "cpu"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _explain(rows: tuple[ModeRow, ...]) -> str:
    grad, no_grad, inference = rows
    saved_part = (
        f"{format_bytes(grad.saved)} of activations autograd saved for backward"
        if grad.saved
        else "no saved activations (nothing in the output's graph)"
    )
    lines = [
        f"A plain forward peaked at {format_bytes(grad.peak_delta)} and left "
        f"{format_bytes(grad.retained)} alive while its output was held, including "
        f"{saved_part}.",
        f"no_grad peaked at {format_bytes(no_grad.peak_delta)} and left "
        f"{format_bytes(no_grad.retained)}: it saves "
        f"{format_bytes(max(grad.retained - no_grad.retained, 0))} of retained memory "
        f"and {format_bytes(max(grad.peak_delta - no_grad.peak_delta, 0))} of peak.",
        "What no_grad saves is the activations autograd would keep for backward, not "
        "gradients: no gradient exists until backward() runs.",
    ]
    diff = inference.peak_delta - no_grad.peak_delta
    if diff == 0 and inference.retained == no_grad.retained:
        lines.append(
            "inference_mode used exactly the memory of no_grad here; its gain is speed "
            "(no version counters or view tracking), and its outputs can never enter "
            "autograd later."
        )
    else:
        lines.append(
            f"inference_mode differs from no_grad by {format_bytes(diff)} of peak; it also "
            "skips version counters and view tracking, and its outputs can never enter "
            "autograd later."
        )
    return " ".join(lines)


def compare_modes(
    model: Callable[..., Any], inputs: Any, *, device: DeviceLike = None
) -> ModeComparison:
    """Measure one forward pass under grad, ``no_grad`` and ``inference_mode``.

    Args:
        model: a module or any callable.
        inputs: one tensor (``model(x)``), a tuple/list (``model(*inputs)``) or a dict
            (``model(**inputs)``).
        device: device to measure; default: the first input tensor's device, else the
            model's first parameter's, else the CPU.

    Returns:
        A :class:`~torchmem.model.readings.ModeComparison` with one row per mode
        (``"grad"``, ``"no_grad"``, ``"inference_mode"``) and an explanation.

    Raises:
        UsageError: ``model`` is not callable.
        DeviceError: the device is unknown or unavailable.

    Example:
        >>> cmp = torchmem.compare_modes(model, torch.randn(64, 512))
        >>> cmp.row("grad").retained > cmp.row("no_grad").retained
        True
    """
    if not callable(model):
        raise UsageError(
            f"torchmem.compare_modes: model must be callable; expected an nn.Module or "
            f"function, got {type(model).__name__}",
            tip="pass the model and its inputs: compare_modes(model, x)",
        )
    name = resolve_device(device) if device is not None else _infer_device(model, inputs)
    call = _caller(model, inputs)
    keep: set[int] = set()
    for t in _tensors(inputs):
        k = storage_key(t)
        if k is not None:
            keep.add(k)
    if isinstance(model, torch.nn.Module):
        for t in list(model.parameters()) + list(model.buffers()):
            k = storage_key(t)
            if k is not None:
                keep.add(k)
    with torch.no_grad():  # warm-up: one-time allocations stay out of the rows
        call()
    _sync(name)
    rows: list[ModeRow] = []
    for mode in MODES:
        gc.collect()
        with Tracker(name) as tracker:
            start = time.perf_counter()
            with _mode(mode):
                out = call()
            _sync(name)
            seconds = time.perf_counter() - start
            outputs = list(_tensors(out))
            retained = tracker.delta
        out_storages: dict[int, int] = {}
        for t in outputs:
            k = storage_key(t)
            if k is not None:
                out_storages[k] = storage_nbytes(t)
        saved = walk(outputs).saved_bytes(exclude=keep | set(out_storages))
        rows.append(
            ModeRow(
                mode=mode,
                peak_delta=tracker.peak_delta,
                retained=retained,
                saved=saved,
                output_bytes=sum(n for k, n in out_storages.items() if k not in keep),
                seconds=seconds,
            )
        )
        del out, outputs
    result = tuple(rows)
    return ModeComparison(
        device=name, source=tracker.source, rows=result, explanation=_explain(result)
    )
