"""Who owns a storage: module parameters and buffers, gradients, optimizer state.

The census asks this module for the role and name of every storage that a known owner
holds. Owners are ``nn.Module`` and ``torch.optim.Optimizer`` instances, passed
explicitly or found by the census' gc scan. Names are module paths taken from the
*root* modules (modules that are no other found module's child), so a parameter of
``model.encoder.layers[3].fc1`` is named ``encoder.layers.3.fc1.weight``.

Cost: proportional to the owners' tensors (one ``named_parameters``/``named_buffers``
pass over each root module, one pass over each optimizer's state), not to all live
tensors. Everything returned is dropped by the caller before the census returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import torch
from torch import Tensor

from torchmem.collect.graph import storage_key
from torchmem.collect.live import _grad, _storage_cdata, _untyped_storage

__all__ = ["subclasses_of", "owner_types", "Owned", "collect_owned", "root_modules"]


PARAMETER, BUFFER, GRADIENT, OPTIMIZER_STATE, ACTIVATION, OTHER = range(6)


def subclasses_of(base: type) -> set[type]:
    """``base`` and every class deriving from it that exists now."""
    out = {base}
    stack = [base]
    sub: type
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                stack.append(sub)
    return out


def owner_types() -> frozenset[type]:
    """All current ``nn.Module`` and ``Optimizer`` classes (for a gc scan)."""
    return frozenset(subclasses_of(torch.nn.Module) | subclasses_of(torch.optim.Optimizer))


@dataclass
class Owned:
    """Tensors that known owners hold, with their roles. Short-lived: holds tensors.

    Attributes:
        roles: storage key -> (role index, name); the highest-precedence role, added
            first, wins. The key is ``key(storage)``: the storage address by default,
            or a :class:`~torchmem.collect.live.Storages` key.
        tensors: every owner-held tensor, for storages no gc scan sees (C++-only grads).
    """

    roles: dict[Any, tuple[int, str | None]] = field(default_factory=dict)
    tensors: list[Tensor] = field(default_factory=list)
    key: Callable[[Any], Any] = _storage_cdata

    def add(self, t: Any, role: int, name: str | None) -> None:
        if not isinstance(t, Tensor) or storage_key(t) is None:  # sparse, nested, meta
            return
        key = self.key(_untyped_storage(t))
        self.roles.setdefault(key, (role, name))
        self.tensors.append(t)


def root_modules(modules: Iterable[torch.nn.Module]) -> list[torch.nn.Module]:
    """The modules that are not a child of another module in ``modules``."""
    mods = list(modules)
    children: set[int] = set()
    for m in mods:
        sub = getattr(m, "_modules", None)
        if isinstance(sub, dict):
            children.update(id(c) for c in sub.values() if c is not None)
    seen: set[int] = set()
    roots = []
    for m in mods:
        if id(m) not in children and id(m) not in seen:
            seen.add(id(m))
            roots.append(m)
    return roots


def _named_roots(
    modules: Iterable[torch.nn.Module] | Mapping[str, torch.nn.Module],
) -> list[tuple[str, torch.nn.Module]]:
    if isinstance(modules, Mapping):
        return [(prefix, m) for prefix, m in modules.items()]
    return [("", m) for m in root_modules(modules)]


def collect_owned(
    modules: Iterable[torch.nn.Module] | Mapping[str, torch.nn.Module],
    optimizers: Iterable[torch.optim.Optimizer],
    leaf_grads: Iterable[Tensor] = (),
    key: Callable[[Any], Any] = _storage_cdata,
) -> Owned:
    """Roles and names of the storages that modules and optimizers hold.

    Args:
        modules: modules (their roots are named from ``""``), or ``{prefix: module}``.
        optimizers: optimizers whose state tensors and parameters to classify.
        leaf_grads: extra gradients (of leaf tensors outside any module).
        key: the storage key for :attr:`Owned.roles` (default: the storage address).

    Returns:
        An :class:`Owned`; drop it before returning to user code.
    """
    owned = Owned(key=key)
    pname: dict[int, str] = {}  # id(param) -> name; params stay alive during the call
    params: list[tuple[str, Tensor]] = []
    buffers: list[tuple[str, Tensor]] = []
    for prefix, root in _named_roots(modules):
        try:
            params.extend(root.named_parameters(prefix=prefix))
            buffers.extend(root.named_buffers(prefix=prefix))
        except Exception:  # noqa: BLE001 - a broken user module must not break a census
            continue
    for name, p in params:
        pname.setdefault(id(p), name)
        owned.add(p, PARAMETER, name)
    opts = list(optimizers)
    for gi, opt in enumerate(opts):
        for g, group in enumerate(getattr(opt, "param_groups", ())):
            for i, p in enumerate(group.get("params", ())):
                if isinstance(p, Tensor) and id(p) not in pname:
                    label = f"param_groups[{g}][{i}]" if len(opts) == 1 else f"optimizer{gi}.param_groups[{g}][{i}]"
                    pname[id(p)] = label
                    params.append((label, p))
                    owned.add(p, PARAMETER, label)
    for name, b in buffers:
        owned.add(b, BUFFER, name)
    for name, p in params:
        owned.add(_grad(p), GRADIENT, f"grad of {name}")
    for leaf_grad in leaf_grads:
        owned.add(leaf_grad, GRADIENT, None)
    for opt in opts:
        state = getattr(opt, "state", None)
        if not isinstance(state, Mapping):
            continue
        for p, slots in state.items():
            owner = pname.get(id(p), "a parameter")
            if not isinstance(slots, Mapping):
                continue
            for slot, value in slots.items():
                if isinstance(value, (list, tuple)):
                    for j, v in enumerate(value):
                        owned.add(v, OPTIMIZER_STATE, f"{slot}[{j}] of {owner}")
                else:
                    owned.add(value, OPTIMIZER_STATE, f"{slot} of {owner}")
    return owned
