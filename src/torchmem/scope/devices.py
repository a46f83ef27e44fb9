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
    for pl in placements:
        devices[pl.device] = devices.get(pl.device, 0) + pl.nbytes
    problems: list[str] = []
    params = [pl for pl in placements if pl.role == "parameter"]
    buffers = [pl for pl in placements if pl.role == "buffer"]
    ins = [pl for pl in placements if pl.role == "input"]

    def by_dev(items: list[Placement]) -> dict[str, list[Placement]]:
        out: dict[str, list[Placement]] = {}
        for item in items:
            out.setdefault(item.device, []).append(item)
        return out

    pdev = by_dev(params)
    if len(pdev) > 1:
        problems.append(f"parameters are spread over devices: {_summary(pdev)}")
    home = max(pdev, key=lambda d: sum(pl.nbytes for pl in pdev[d])) if pdev else None
    if home is None and buffers:
        home = buffers[0].device
    for buf in buffers:
        if home is not None and buf.device != home:
            problems.append(f"buffer {buf.name} is on {buf.device}; the parameters are on {home}")
    if home is None and ins:
        idev = by_dev(ins)
        if len(idev) > 1:
            problems.append(f"inputs are spread over devices: {_summary(idev)}")
    for inp in ins:
        if home is not None and inp.device != home:
            problems.append(f"{inp.name} is on {inp.device}; the parameters are on {home}")

    float_params: dict[str, int] = {}
    for pl in params:
        if torch.empty(0, dtype=getattr(torch, pl.dtype)).is_floating_point():
            float_params[pl.dtype] = float_params.get(pl.dtype, 0) + pl.nbytes
    if len(float_params) > 1:
        mix = ", ".join(sorted(float_params))
        problems.append(f"parameters mix floating dtypes: {mix}")
    main = max(float_params, key=lambda d: float_params[d]) if float_params else None
    if main is not None:
        for inp in ins:
            floating = torch.empty(0, dtype=getattr(torch, inp.dtype)).is_floating_point()
            if floating and inp.dtype != main:
                problems.append(f"{inp.name} is {inp.dtype}; the parameters are {main}")
    return DeviceReport(tuple(placements), devices, tuple(problems))
