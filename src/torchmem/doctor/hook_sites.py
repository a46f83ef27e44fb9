"""Which ``register_*_hook`` call filled a module's hook dict, from what the dict holds.

A hook dict that grows names its module (``self.cam.model.conv5._backward_hooks``), but the
script registers through another name (``target_layer.register_full_backward_hook(
self.save_gradient)`` in a loop over the layers), and often in more than one statement:
a forward and a backward hook, or an ``if``/``else`` between the full and the legacy
backward hook. What the dict holds tells them apart:

* the functions it holds: a bound method's ``__func__``, a ``functools.partial``'s
  ``func``, a plain function, by ``__name__`` (:func:`hook_names`); the registration
  passes that function (``self.save_gradient``, ``partial(save, name)``, ``save``);
* for ``_backward_hooks``, which method filled it: torch records on the module whether
  its backward hooks are full ones (``_is_full_backward_hook``: True after
  ``register_full_backward_hook``, False after ``register_backward_hook``).

:func:`matching_registrations` drops the registration statements that cannot have filled
the dict: another method, or a function the script defines that the dict does not hold
(a registration passing a variable is kept); the caller accepts a site found anywhere in
the script only when one statement is left, so the line is never a guess.
"""

from __future__ import annotations

import ast
import functools
import types
from typing import AbstractSet, Any, Sequence

__all__ = ["hook_names", "hook_methods", "matching_registrations", "HOOK_METHODS"]

#: the ``register_*`` methods that add to each module hook dict
HOOK_METHODS = {
    "_forward_hooks": ("register_forward_hook",),
    "_forward_pre_hooks": ("register_forward_pre_hook",),
    "_backward_hooks": ("register_full_backward_hook", "register_backward_hook"),
    "_backward_pre_hooks": ("register_full_backward_pre_hook",),
}
#: the most recent entries whose functions are read (growth adds at the end)
_LAST = 4


def _function_name(hook: Any) -> str | None:
    """The name of the function a hook runs: read off plain functions, bound methods and
    partials only (no attribute of another object is read: its ``__getattr__`` is the
    script's code)."""
    fn = hook.__func__ if isinstance(hook, types.MethodType) else hook
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType):
        return None
    name = fn.__name__
    return name if name.isidentifier() else None


def hook_names(hooks: Any) -> tuple[str, ...]:
    """Names of the functions the last few entries of the hook dict ``hooks`` hold.

    Example:
        >>> def save(module, inputs, output): pass
        >>> hook_names({0: save, 1: functools.partial(save, None), 2: lambda *a: None})
        ('save',)
    """
    try:
        last = list(hooks.values())[-_LAST:]
    except Exception:  # noqa: BLE001 - not a dict after all
        return ()
    return tuple(dict.fromkeys(n for n in map(_function_name, last) if n is not None))


def hook_methods(module: Any, hook_dict: str) -> tuple[str, ...]:
    """The ``register_*`` methods that can have filled ``module.<hook_dict>``.

    Example:
        >>> import torch
        >>> m = torch.nn.Linear(1, 1)
        >>> _ = m.register_full_backward_hook(lambda *a: None)
        >>> hook_methods(m, "_backward_hooks")
        ('register_full_backward_hook',)
    """
    methods = HOOK_METHODS.get(hook_dict, ())
    if hook_dict == "_backward_hooks":
        full = vars(module).get("_is_full_backward_hook")  # set by torch, in the instance dict
        if full is True:
            return ("register_full_backward_hook",)
        if full is False:
            return ("register_backward_hook",)
    return methods


def _passed_name(value: str | None) -> str | None:
    """The function name a registration passes (``self.save`` -> ``save``,
    ``partial(save, k)`` -> ``save``)."""
    if not value:
        return None
    try:
        node = ast.parse(value, mode="eval").body
    except SyntaxError:
        return None
    while isinstance(node, ast.Call) and node.args:  # partial(fn, ...)
        node = node.args[0]
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def matching_registrations(found: Sequence[Any], names: Sequence[str], methods: Sequence[str],
                           defined: AbstractSet[str] = frozenset()) -> list[Any]:
    """The registration statements of ``found`` (``Statement`` of kind ``hook``) that can
    have filled a hook dict holding the functions ``names``, filled by one of ``methods``
    (either check is skipped when its sequence is empty).

    A statement that passes a function the script defines (``defined``: the names of its
    ``def`` statements) under another name than all of ``names`` did not fill the dict;
    one that passes a variable (``fn``, bound to some function) may have, and is kept.
    """
    out = [s for s in found if not methods or s.method in methods]
    if names:
        out = [s for s in out if (_passed_name(s.value) or "") not in defined
               or _passed_name(s.value) in names]
    return out
