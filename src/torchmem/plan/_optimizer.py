"""The optimizer that :func:`torchmem.estimate` runs on fake tensors.

A fresh optimizer of the user's class runs on the fakes, with the user's hyperparameters,
and the same implementation (per-parameter loop or multi-tensor ``foreach``) that torch
would pick for the real parameters.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from torchmem.errors import UsageError

__all__ = ["optimizer_groups"]


def _foreach_devices() -> frozenset[str]:
    try:  # private, but what the optimizers themselves consult
        from torch.optim.optimizer import _get_foreach_kernels_supported_devices

        return frozenset(_get_foreach_kernels_supported_devices())
    except Exception:  # noqa: BLE001 - older or newer torch: the documented default
        return frozenset({"cuda", "xpu"})


def _implementation(group: dict[str, Any], params: list[Any], device_type: str) -> dict[str, Any]:
    """The group's hyperparameters with ``foreach`` decided as torch decides it for the
    real parameters. Left at ``None``, an optimizer picks the multi-tensor implementation
    when every parameter is a plain tensor on a device with foreach kernels (CUDA): fake
    tensors fail that type check, so the fakes would run the per-parameter loop, whose
    temporaries (and peak) differ."""
    hyper = {k: v for k, v in group.items() if k != "params"}
    if "foreach" not in hyper or hyper["foreach"] is not None or hyper.get("fused") \
            or hyper.get("differentiable"):
        return hyper
    plain = all(type(p) in (torch.Tensor, nn.Parameter) for p in params)
    hyper["foreach"] = plain and device_type in _foreach_devices()
    return hyper


def optimizer_groups(
    optimizer: torch.optim.Optimizer, fakes: dict[int, torch.Tensor], device_type: str,
    tip: str,
) -> list[dict[str, Any]]:
    """The optimizer's parameter groups on the fakes, hyperparameters as for the real ones."""
    groups = []
    for group in optimizer.param_groups:
        real = [p for p in group["params"] if id(p) in fakes]
        params = [fakes[id(p)] for p in real]
        if params:
            groups.append({**_implementation(group, real, device_type), "params": params})
    if not groups:
        raise UsageError(
            "torchmem.estimate: the optimizer updates none of the model's parameters; "
            "expected an optimizer built on model.parameters()",
            tip=tip,
        )
    return groups
