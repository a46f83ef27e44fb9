"""Watch a few parameters' gradients between two step boundaries (``grad_not_cleared``).

At a deep-analysis boundary :meth:`GradWatch.start` finds parameters to watch (up to 4 of
each optimizer, up to 3 optimizers; without one, a model's or a list/dict of leaf tensors
that require grad: parameters updated by hand) and notes their ``.grad`` storages and version counters. At
the next boundary :meth:`GradWatch.finish` compares: gradients accumulated when a
one-shot hook on each parameter (``Tensor.register_hook``, which runs before the new
gradient is added to ``.grad``) saw, at the first backward after the boundary, a
``.grad`` that nobody cleared (not None, not all zeros); where no hook fired, when the
same ``.grad`` storages' versions advanced exactly by the backward calls in between.
And no ``zero_grad()`` ran that clears them (with one optimizer, none at all). The result is a :class:`~torchmem.doctor.evidence.GradCheck`.

Accumulated gradients are a fault only when they are applied: the check also records
whether the parameters themselves were *updated* in between, that is whether their
version counters advanced (an optimizer's ``p.add_``, ``p -= lr * p.grad`` under
``no_grad``) or a few of their values moved (``p.data -= ...``, which bypasses the
version counter). A loop that only calls ``backward()`` (gradients summed over batches
on purpose, saliency, a Fisher estimate, a memory test) updates nothing.

Parameters are held by weak references only; what is kept between the two boundaries is
storage keys, integers and up to :data:`SAMPLE` floats per parameter.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchmem.doctor.culprit import frame_chain, read_locals
from torchmem.doctor.evidence import GradCheck
from torchmem.doctor.source import frame_site

__all__ = ["GradWatch", "SAMPLE", "MAX_GROUPS", "PER_GROUP", "sample_values"]

#: values read from each watched parameter (evenly spaced) to see whether it was updated
SAMPLE = 16


def _plain(t: Any) -> bool:
    """A plain tensor (or Parameter) whose values can be read locally: not a subclass
    such as DTensor, where reading values may run a collective."""
    import torch

    data = t.data if isinstance(t, torch.nn.Parameter) else t
    return type(data) is torch.Tensor


#: optimizers watched at once, each with up to :data:`PER_GROUP` parameters
MAX_GROUPS = 3
#: parameters watched per optimizer
PER_GROUP = 4


@dataclass
class _Group:
    """The watched parameters of one optimizer (or of the model updated by hand)."""

    name: str | None
    refs: list[weakref.ref[Any]]
    owner: weakref.ref[Any] | None = None  # the optimizer
    manual: bool = False
    zeroed: bool = False  # its zero_grad() (or a module's holding its parameters) ran


class GradWatch:
    """Gradient bookkeeping of a few parameters per optimizer between two consecutive steps.

    A script with several optimizers (a GAN's generator and discriminator) gets one check
    per optimizer: each knows whether *its* gradients were cleared, by its own
    ``zero_grad()``, a module's ``zero_grad()`` that holds its parameters, or
    ``p.grad = None`` (seen by the one-shot hooks)."""

    def __init__(self) -> None:
        self._groups: list[_Group] = []
        self._state: tuple[int, list[list[tuple[int | None, int]]],
                           list[list[tuple[int, list[float]]]]] | None = None
        self._hooks: list[Any] = []
        self._uncleared: dict[tuple[int, int], bool] = {}

    def reset(self) -> None:
        """Forget a check in progress and the parameters watched (the step source changed:
        the parameters found at a loop's iterations before the optimizer existed, a
        model's updated by hand, are found again among the optimizers' now)."""
        self._state = None
        self._groups = []
        self._remove_hooks()

    def _remove_hooks(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def _arm(self) -> None:
        """One-shot hooks that see, at the first backward after this boundary, whether
        each watched parameter's ``.grad`` was cleared since the update (None or all
        zeros) before the new gradient is added to it. They return nothing (the gradient
        is not changed), hold the parameter weakly and remove themselves."""
        self._remove_hooks()
        self._uncleared = {}
        for g, group in enumerate(self._groups):
            group.zeroed = False
            for i, ref in enumerate(group.refs):
                p = ref()
                if p is not None:
                    self._hooks.append(p.register_hook(self._hook((g, i), ref)))

    def _hook(self, key: tuple[int, int], ref: weakref.ref[Any]) -> Any:
        def seen(_grad: Any) -> None:
            if key in self._uncleared:
                return
            p = ref()
            g = p.grad if p is not None else None
            if g is not None and not _plain(g):
                return  # a tensor subclass (DTensor...): reading it may communicate
            try:
                self._uncleared[key] = g is not None and not g.is_sparse and bool(g.any())
            except Exception:  # noqa: BLE001 - an unreadable gradient is not evidence
                pass
        return seen

    def note_zero(self, target: Any) -> None:
        """A ``zero_grad()`` ran on ``target`` (an optimizer or a module): mark the groups
        it clears. Only while a check is pending; nothing of ``target`` is kept."""
        if self._state is None or target is None:
            return
        import torch

        for group in self._groups:
            if group.zeroed:
                continue
            if group.owner is not None and group.owner() is target:
                group.zeroed = True
            elif isinstance(target, torch.nn.Module):
                ids = {id(r()) for r in group.refs}
                group.zeroed = any(id(p) in ids for p in target.parameters())

    def pending(self, step: int) -> bool:
        """True when a check started at the previous step waits to be finished at ``step``."""
        return self._state is not None and self._state[0] == step - 1

    def start(self, step: int, frame: FrameType | None, main_globals: Any,
              is_user_file: Any, outermost: Any) -> None:
        """Note the watched parameters' gradients at boundary ``step``."""
        if not any(r() is not None for g in self._groups for r in g.refs):
            self._find_params(frame, is_user_file, outermost)
        if self._groups:
            self._state = (step, [self._grad_snapshot(g) for g in self._groups],
                           [self._param_snapshot(g) for g in self._groups])
            self._arm()

    def finish(self, step: int, backward: int, zero: int, frame: FrameType | None) -> list[GradCheck]:
        """Compare with the boundary where :meth:`start` ran: one check per watched
        optimizer (empty when nothing was watched). With one optimizer, every
        ``zero_grad()`` call counts (``zero``); with several, only those that clear it."""
        state = self._state
        self._state = None
        uncleared, self._uncleared = self._uncleared, {}
        self._remove_hooks()
        if state is None or not self._groups:
            return []
        site = frame_site(frame)
        checks = []
        for g, group in enumerate(self._groups):
            before, params_before = state[1][g], state[2][g]
            if not before:
                continue
            now = self._grad_snapshot(group)
            same = all(b[0] is not None and b[0] == n[0] for b, n in zip(before, now))
            only_backward = all(n[1] - b[1] == backward for b, n in zip(before, now)) if backward else False
            accumulated = same and only_backward
            seen = {i: v for (gi, i), v in uncleared.items() if gi == g}
            if seen and backward:
                # seen directly: the first backward after the boundary added to gradients
                # nobody cleared (a clip_grad_norm_ between backward and step also advances
                # the versions, which the count above cannot tell from a zero_())
                accumulated = any(seen.values())
            updated = any(b != n for b, n in zip(params_before, self._param_snapshot(group)))
            grad_bytes = 0
            for ref in group.refs:
                p = ref()
                if p is not None and p.grad is not None:
                    grad_bytes += p.grad.numel() * p.grad.element_size()
            calls = zero if len(self._groups) == 1 else int(group.zeroed)
            checks.append(GradCheck(
                step=step, accumulated=accumulated, zero_grad_calls=calls,
                manual=group.manual, updated=updated,
                backward_calls=backward, grad_bytes=grad_bytes, optimizer_name=group.name,
                file=site[0] if site else None, line=site[1] if site else None,
                code=site[2] if site else None))
        return checks

    def _find_params(self, frame: FrameType | None, is_user_file: Any, outermost: Any) -> None:
        """Find parameters to watch: up to :data:`PER_GROUP` of each of up to
        :data:`MAX_GROUPS` optimizers of the innermost frame that has one, else a model's
        or leaf tensors' (one group)."""
        import torch

        groups: list[_Group] = []
        seen: set[int] = set()
        fallback: list[tuple[str, Any]] = []
        for f in frame_chain(frame, is_user_file, outermost):
            if f.f_code.co_name == "<module>":
                spaces = list(f.f_globals.items())
            else:
                spaces = list(read_locals(f).items())
            for name, value in spaces:
                objs = [(name, value)]
                if hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, torch.Tensor)):
                    try:
                        objs += [(f"{name}.{k}", v) for k, v in vars(value).items()]
                    except TypeError:
                        pass
                for path, obj in objs:
                    if isinstance(obj, torch.optim.Optimizer):
                        if id(obj) in seen or len(groups) >= MAX_GROUPS:
                            continue
                        seen.add(id(obj))
                        params = [p for group in obj.param_groups for p in group.get("params", ())
                                  if getattr(p, "requires_grad", False)][:PER_GROUP]
                        if params:
                            groups.append(_Group(path, [weakref.ref(p) for p in params],
                                                 owner=weakref.ref(obj)))
                    elif isinstance(obj, torch.nn.Module):
                        fallback.extend((path, p) for p in obj.parameters())
                    elif isinstance(obj, (list, tuple)) and obj and all(
                            isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad for t in obj):
                        fallback.extend((path, t) for t in obj)
                    elif isinstance(obj, dict) and obj and all(
                            isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad for t in obj.values()):
                        fallback.extend((path, t) for t in obj.values())
                objs.clear()
            spaces.clear()
            if groups:
                break
        if not groups and fallback:
            params = [t for _, t in fallback if getattr(t, "requires_grad", False)][:PER_GROUP]
            if params:
                groups = [_Group(fallback[0][0], [weakref.ref(p) for p in params], manual=True)]
        fallback.clear()
        self._groups = groups

    @staticmethod
    def _grad_snapshot(group: _Group) -> list[tuple[int | None, int]]:
        from torchmem.collect.graph import storage_key

        out: list[tuple[int | None, int]] = []
        for ref in group.refs:
            p = ref()
            g = p.grad if p is not None else None
            out.append((storage_key(g), int(g._version)) if g is not None else (None, 0))
        return out

    @staticmethod
    def _param_snapshot(group: _Group) -> list[tuple[int, list[float]]]:
        """Each watched parameter's version counter and :data:`SAMPLE` of its values."""
        out: list[tuple[int, list[float]]] = []
        for ref in group.refs:
            p = ref()
            if p is None:
                out.append((-1, []))
                continue
            out.append((int(p._version), sample_values(p)))
        return out


def sample_values(t: Any) -> list[float]:
    """:data:`SAMPLE` of ``t``'s values, evenly spaced, read through a view (no copy of
    the tensor); empty for what cannot be read so (a tensor subclass, a sparse or
    non-contiguous tensor, an empty one)."""
    import torch

    if not (_plain(t) and t.layout == torch.strided and t.is_contiguous() and t.numel()):
        return []
    with torch.no_grad():
        flat = t.detach().view(-1)
        return flat[::max(flat.numel() // SAMPLE, 1)][:SAMPLE].tolist()
