"""Private: the global hooks a scope needs while it is open (installed by
:mod:`torchmem.scope._stack`, removed after the last scope).

* optimizer step pre- and post-hooks count the ``optimizer.step()`` calls running (a
  step that raises leaves the count up until the thread's last scope exits, which only
  makes the calls engine register less) and mark the optimizer's state tensors
  (``optimizer_state``);
* module registration hooks mark parameters and buffers assigned to an ``nn.Module``;
* while a dispatch-engine scope is open, ``Tensor.register_hook`` and
  ``register_post_accumulate_grad_hook`` are wrapped so that the scope knows the hook
  functions registered inside it (the calls engine sees those calls itself).

All only act on the thread that has a scope open.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from torchmem.scope._engine import _tls, owner_of

__all__ = ["install_hooks", "uninstall_hooks", "install_spies", "remove_spies"]

_hooks_lock = threading.Lock()
_hooks_users = 0
_handles: list[Any] = []


def _before_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    st = getattr(_tls, "state", None)
    if st is not None and st.stack:
        st.in_step += 1


def _on_optimizer_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    st = getattr(_tls, "state", None)
    if st is None or not st.stack:
        return
    if st.in_step:
        st.in_step -= 1
    for per_param in optimizer.state.values():
        values = per_param.values() if isinstance(per_param, dict) else (per_param,)
        for v in values:
            if isinstance(v, torch.Tensor):
                st.mark(v, "optimizer_state")
    for group in optimizer.param_groups:
        for v in group.values():
            if isinstance(v, torch.Tensor):
                st.mark(v, "optimizer_state")


def _on_module_tensor(module: Any, name: str, value: Any) -> None:
    st = getattr(_tls, "state", None)
    if st is None or not st.stack or not isinstance(value, torch.Tensor):
        return None
    st.mark(value, "module")
    return None


class _HookSpy:
    """Wraps a ``Tensor`` hook-registration method while scopes are open: the hook
    functions registered inside a scope are remembered (until its exit), because the
    tensors their closures capture are read by a backward pass that may run later."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.original = getattr(torch.Tensor, name)
        original = self.original

        def register(tensor: Any, hook: Any, *args: Any, **kwargs: Any) -> Any:
            st = getattr(_tls, "state", None)
            if st is not None and st.stack:
                owner = owner_of(st.stack)
                if owner is not None:
                    owner._hook_fns.append(hook)
            return original(tensor, hook, *args, **kwargs)

        register.__wrapped__ = original  # type: ignore[attr-defined]
        register.__doc__ = original.__doc__
        register.__name__ = name
        self.wrapper = register

    def install(self) -> None:
        setattr(torch.Tensor, self.name, self.wrapper)

    def remove(self) -> None:
        if torch.Tensor.__dict__.get(self.name) is self.wrapper:
            setattr(torch.Tensor, self.name, self.original)


_HOOK_METHODS = ("register_hook", "register_post_accumulate_grad_hook")


def install_hooks() -> None:
    """Install the global optimizer/module hooks (reference counted)."""
    global _hooks_users
    with _hooks_lock:
        _hooks_users += 1
        if _hooks_users > 1:
            return
        from torch.nn.modules import module as _module
        from torch.optim import optimizer as _optimizer

        _handles.append(_optimizer.register_optimizer_step_pre_hook(_before_optimizer_step))
        _handles.append(_optimizer.register_optimizer_step_post_hook(_on_optimizer_step))
        _handles.append(_module.register_module_buffer_registration_hook(_on_module_tensor))
        _handles.append(_module.register_module_parameter_registration_hook(_on_module_tensor))


_spies_users = 0
_spies: list[_HookSpy] = []


def install_spies() -> None:
    """Wrap the ``Tensor`` hook-registration methods (reference counted): needed only
    while a dispatch-engine scope is open, since a dispatch mode does not see those
    calls (the calls engine does, and needs no patch of ``torch.Tensor``)."""
    global _spies_users
    with _hooks_lock:
        _spies_users += 1
        if _spies_users > 1:
            return
        for name in _HOOK_METHODS:
            if name in torch.Tensor.__dict__:
                spy = _HookSpy(name)
                spy.install()
                _spies.append(spy)


def remove_spies() -> None:
    """Undo one :func:`install_spies`; unwrap after the last."""
    global _spies_users
    with _hooks_lock:
        _spies_users = max(_spies_users - 1, 0)
        if _spies_users:
            return
        spies = list(_spies)
        _spies.clear()
    for spy in reversed(spies):
        spy.remove()


def uninstall_hooks() -> None:
    """Undo one :func:`install_hooks`; remove the hooks after the last."""
    global _hooks_users
    with _hooks_lock:
        _hooks_users = max(_hooks_users - 1, 0)
        if _hooks_users:
            return
        handles = list(_handles)
        _handles.clear()
    for h in handles:
        h.remove()
