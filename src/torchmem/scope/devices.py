"""Device and dtype consistency of a model and its inputs, as data.

"Expected all tensors to be on the same device" and "expected scalar type Float but
found Double" are raised deep inside a forward pass. ``check_devices`` answers before
running it: where every parameter, buffer and input lives, and what does not match.
"""

from __future__ import annotations

from typing import Any

import torch

from torchmem.model.scope import DeviceReport, Placement
from torchmem.scope._objects import named_tensors
from torchmem.units import format_bytes

__all__ = ["check_devices"]


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _summary(by_device: dict[str, list[Placement]]) -> str:
    parts = []
    for dev, items in sorted(by_device.items(), key=lambda kv: -sum(p.nbytes for p in kv[1])):
        parts.append(f"{dev} ({len(items)}, {format_bytes(sum(p.nbytes for p in items))})")
    return ", ".join(parts)


def check_devices(model: Any = None, *inputs: Any) -> DeviceReport:
    """Report where a model's parameters and buffers and the inputs live.

    Args:
        model: an ``nn.Module`` (or ``None`` to compare inputs only).
        *inputs: tensors, or (nested) lists/tuples/dicts of tensors (a batch dict).

    Returns:
        A :class:`~torchmem.model.scope.DeviceReport`; ``report.ok`` is True when
        parameters, buffers and inputs share one device and every floating-point input
        has the parameters' floating-point dtype. Integer inputs (token ids, labels)
        and boolean masks are not dtype-checked.

    Example:
        >>> r = torchmem.check_devices(model, batch["x"], batch["y"])   # doctest: +SKIP
        >>> r.problems                                                   # doctest: +SKIP
        ("input[0] is on cpu; the parameters are on cuda:0",)

    Known limitations:
        Deliberately split models (pipeline stages, CPU-offloaded embeddings) are
        reported as spread over devices: that is a fact, not necessarily a bug.
    """
    placements: list[Placement] = []
    if model is not None:
        if not isinstance(model, torch.nn.Module):
            inputs = (model,) + inputs
        else:
            for name, p in model.named_parameters():
                placements.append(Placement("parameter", name, str(p.device), _dtype(p), p.nbytes))
            for name, b in model.named_buffers():
                placements.append(Placement("buffer", name, str(b.device), _dtype(b), b.nbytes))
    for i, value in enumerate(inputs):
        for name, t in named_tensors(value, f"input[{i}]"):
            placements.append(Placement("input", name, str(t.device), _dtype(t), t.nbytes))

    devices: dict[str, int] = {}
    for p in placements:
        devices[p.device] = devices.get(p.device, 0) + p.nbytes
    problems: list[str] = []
    params = [p for p in placements if p.role == "parameter"]
    buffers = [p for p in placements if p.role == "buffer"]
    ins = [p for p in placements if p.role == "input"]

    def by_dev(items: list[Placement]) -> dict[str, list[Placement]]:
        out: dict[str, list[Placement]] = {}
        for p in items:
            out.setdefault(p.device, []).append(p)
        return out

    pdev = by_dev(params)
    if len(pdev) > 1:
        problems.append(f"parameters are spread over devices: {_summary(pdev)}")
    home = max(pdev, key=lambda d: sum(p.nbytes for p in pdev[d])) if pdev else None
    if home is None and buffers:
        home = buffers[0].device
    for b in buffers:
        if home is not None and b.device != home:
            problems.append(f"buffer {b.name} is on {b.device}; the parameters are on {home}")
    if home is None and ins:
        idev = by_dev(ins)
        if len(idev) > 1:
            problems.append(f"inputs are spread over devices: {_summary(idev)}")
    for t in ins:
        if home is not None and t.device != home:
            problems.append(f"{t.name} is on {t.device}; the parameters are on {home}")

    float_params: dict[str, int] = {}
    for p in params:
        if torch.empty(0, dtype=getattr(torch, p.dtype)).is_floating_point():
            float_params[p.dtype] = float_params.get(p.dtype, 0) + p.nbytes
    if len(float_params) > 1:
        mix = ", ".join(sorted(float_params))
        problems.append(f"parameters mix floating dtypes: {mix}")
    main = max(float_params, key=lambda d: float_params[d]) if float_params else None
    if main is not None:
        for t in ins:
            floating = torch.empty(0, dtype=getattr(torch, t.dtype)).is_floating_point()
            if floating and t.dtype != main:
                problems.append(f"{t.name} is {t.dtype}; the parameters are {main}")
    return DeviceReport(tuple(placements), devices, tuple(problems))
