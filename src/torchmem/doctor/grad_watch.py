"""Watch a few parameters' gradients between two step boundaries (``grad_not_cleared``).

At a deep-analysis boundary :meth:`GradWatch.start` finds up to 4 parameters to watch
(an optimizer's; without one, a model's or a list/dict of leaf tensors that require grad:
parameters updated by hand) and notes their ``.grad`` storages and version counters. At
the next boundary :meth:`GradWatch.finish` compares: gradients accumulated when a
one-shot hook on each parameter (``Tensor.register_hook``, which runs before the new
gradient is added to ``.grad``) saw, at the first backward after the boundary, a
``.grad`` that nobody cleared (not None, not all zeros); where no hook fired, when the
same ``.grad`` storages' versions advanced exactly by the backward calls in between.
And no ``zero_grad()`` ran. The result is a :class:`~torchmem.doctor.evidence.GradCheck`.

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
from types import FrameType
from typing import Any

from torchmem.doctor.culprit import frame_chain, read_locals
from torchmem.doctor.evidence import GradCheck
from torchmem.doctor.source import frame_site

__all__ = ["GradWatch", "SAMPLE"]

#: values read from each watched parameter (evenly spaced) to see whether it was updated
SAMPLE = 16


def _plain(t: Any) -> bool:
    """A plain tensor (or Parameter) whose values can be read locally: not a subclass
    such as DTensor, where reading values may run a collective."""
    import torch

    data = t.data if isinstance(t, torch.nn.Parameter) else t
    return type(data) is torch.Tensor


class GradWatch:
    """Gradient bookkeeping of up to 4 parameters between two consecutive steps."""

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Any]] = []
        self._state: tuple[int, list[tuple[int | None, int]], list[tuple[int, list[float]]]] | None = None
        self._optimizer_name: str | None = None
        self._manual_update = False
        self._hooks: list[Any] = []
        self._uncleared: dict[int, bool] = {}

    def reset(self) -> None:
        """Forget a check in progress (the step source changed)."""
        self._state = None
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
        for i, ref in enumerate(self._refs):
            p = ref()
            if p is None:
                continue
            self._hooks.append(p.register_hook(self._hook(i, ref)))

    def _hook(self, index: int, ref: weakref.ref[Any]) -> Any:
        def seen(_grad: Any) -> None:
            if index in self._uncleared:
                return
            p = ref()
            g = p.grad if p is not None else None
            if g is not None and not _plain(g):
                return  # a tensor subclass (DTensor...): reading it may communicate
            try:
                self._uncleared[index] = g is not None and not g.is_sparse and bool(g.any())
            except Exception:  # noqa: BLE001 - an unreadable gradient is not evidence
                pass
        return seen

    def pending(self, step: int) -> bool:
        """True when a check started at the previous step waits to be finished at ``step``."""
        return self._state is not None and self._state[0] == step - 1

    def start(self, step: int, frame: FrameType | None, main_globals: Any,
              is_user_file: Any, outermost: Any) -> None:
        """Note the watched parameters' gradients at boundary ``step``."""
        if not self._refs or all(r() is None for r in self._refs):
            self._find_params(frame, is_user_file, outermost)
        if self._refs:
            self._state = (step, self._grad_snapshot(), self._param_snapshot())
            self._arm()

    def finish(self, step: int, backward: int, zero: int, frame: FrameType | None) -> GradCheck | None:
        """Compare with the boundary where :meth:`start` ran; None when nothing was watched."""
        state = self._state
        self._state = None
        uncleared, self._uncleared = self._uncleared, {}
        self._remove_hooks()
        if state is None or not self._refs or not state[1]:
            return None
        now = self._grad_snapshot()
        before = state[1]
        same = all(b[0] is not None and b[0] == n[0] for b, n in zip(before, now))
        only_backward = all(n[1] - b[1] == backward for b, n in zip(before, now)) if backward else False
        accumulated = same and only_backward
        if uncleared and backward:
            # seen directly: the first backward after the boundary added to gradients
            # nobody cleared (a clip_grad_norm_ between backward and step also advances
            # the versions, which the count above cannot tell from a zero_())
            accumulated = any(uncleared.values())
        params_now = self._param_snapshot()
        updated = any(b != n for b, n in zip(state[2], params_now))
        site = frame_site(frame)
        grad_bytes = 0
        for ref in self._refs:
            p = ref()
            if p is not None and p.grad is not None:
                grad_bytes += p.grad.numel() * p.grad.element_size()
        return GradCheck(
            step=step, accumulated=accumulated, zero_grad_calls=zero,
            manual=self._manual_update, updated=updated,
            backward_calls=backward, grad_bytes=grad_bytes, optimizer_name=self._optimizer_name,
            file=site[0] if site else None, line=site[1] if site else None,
            code=site[2] if site else None)

    def _find_params(self, frame: FrameType | None, is_user_file: Any, outermost: Any) -> None:
        """Find up to 4 parameters to watch: an optimizer's, else a model's or leaf tensors'."""
        import torch

        found: list[Any] = []
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
                        if self._optimizer_name is None:
                            self._optimizer_name = path
                        for group in obj.param_groups:
                            found.extend(group.get("params", ()))
                    elif isinstance(obj, torch.nn.Module):
                        fallback.extend((path, p) for p in obj.parameters())
                    elif isinstance(obj, (list, tuple)) and obj and all(
                            isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad for t in obj):
                        fallback.extend((path, t) for t in obj)
                    elif isinstance(obj, dict) and obj and all(
                            isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad for t in obj.values()):
                        fallback.extend((path, t) for t in obj.values())
            spaces.clear()
            if found:
                break
        if not found and fallback:
            self._optimizer_name = self._optimizer_name or fallback[0][0]
            self._manual_update = True
            found = [t for _, t in fallback]
        fallback.clear()
        params = [p for p in found if getattr(p, "requires_grad", False)][:4]
        self._refs = [weakref.ref(p) for p in params]

    def _grad_snapshot(self) -> list[tuple[int | None, int]]:
        from torchmem.collect.graph import storage_key

        out: list[tuple[int | None, int]] = []
        for ref in self._refs:
            p = ref()
            g = p.grad if p is not None else None
            out.append((storage_key(g), int(g._version)) if g is not None else (None, 0))
        return out

    def _param_snapshot(self) -> list[tuple[int, list[float]]]:
        """Each watched parameter's version counter and :data:`SAMPLE` of its values."""
        import torch

        out: list[tuple[int, list[float]]] = []
        for ref in self._refs:
            p = ref()
            if p is None:
                out.append((-1, []))
                continue
            values: list[float] = []
            if _plain(p) and p.layout == torch.strided and p.is_contiguous() and p.numel():
                with torch.no_grad():  # a view and SAMPLE numbers: no copy of the parameter
                    flat = p.detach().view(-1)
                    values = flat[::max(flat.numel() // SAMPLE, 1)][:SAMPLE].tolist()
            out.append((int(p._version), values))
        return out
