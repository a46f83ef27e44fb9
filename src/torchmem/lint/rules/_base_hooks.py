"""Methods that a base class of another file calls (no torch).

``class LanguageModelingTask(BaseTask)`` defines ``_predict()``, which nothing in its file
calls: ``BaseTask.run()`` of another file calls it, inside ``torch.inference_mode()``. A
private method (one leading underscore) of a class with a base that is neither torch's nor
of this file, never called in the file, is such a hook: its grad mode is the base class's
choice, out of sight. So are the methods of the file that only such hooks call
(``_generate()`` calling ``self.generate_decoder()``). TMM103's judgements of a function
by what it does with its outputs, or by the sub-modules it runs, skip them.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchmem.lint.callers import file_functions

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.engine import Context

__all__ = ["base_hook"]

_SCRATCH = "TMM103.base_hooks"
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_Key = tuple[str | None, str]


def base_hook(ctx: Context) -> bool:
    """Whether the current function is a hook of a base class of another file (or is only
    called by such hooks)."""
    fn = ctx.fn
    key: _Key = ("self" if fn.class_name else None, fn.name)
    memo = ctx.scratch.get(_SCRATCH)
    if memo is None:
        memo = ctx.scratch[_SCRATCH] = _hooks(ctx)
    return key in memo


def _foreign_base(cls: ast.ClassDef, local: set[str], ctx: Context) -> bool:
    for base in cls.bases:
        qual = ctx.qualname(base) or ""
        name = base.id if type(base) is ast.Name else (
            base.attr if type(base) is ast.Attribute else "")
        if qual.startswith("torch.") or name in local or name in ("object", "Generic", ""):
            continue
        return True
    return False


def _hooks(ctx: Context) -> set[_Key]:
    tree = ctx.tree
    if tree is None:
        return set()
    defs = file_functions(tree)
    local = {s.name for s in tree.body if type(s) is ast.ClassDef}
    callers: dict[_Key, set[_Key | None]] = {}
    candidates: set[_Key] = set()

    def calls(node: ast.AST, caller: _Key | None) -> None:
        for sub in ast.walk(node):
            if type(sub) is not ast.Call:
                continue
            func = sub.func
            if type(func) is ast.Name and (None, func.id) in defs:
                callers.setdefault((None, func.id), set()).add(caller)
            elif type(func) is ast.Attribute and type(func.value) is ast.Name and \
                    func.value.id == "self" and ("self", func.attr) in defs:
                callers.setdefault(("self", func.attr), set()).add(caller)

    for stmt in tree.body:
        if type(stmt) is ast.ClassDef and _foreign_base(stmt, local, ctx):
            candidates.update(("self", sub.name) for sub in stmt.body
                              if isinstance(sub, _FUNCS) and sub.name.startswith("_")
                              and not sub.name.startswith("__"))
    if not candidates:
        return set()  # most files: no private method of a class with a foreign base
    for stmt in tree.body:
        if isinstance(stmt, _FUNCS):
            calls(stmt, (None, stmt.name))
        elif type(stmt) is ast.ClassDef:
            for sub in stmt.body:
                calls(sub, ("self", sub.name) if isinstance(sub, _FUNCS) else None)
        else:
            calls(stmt, None)
    hooks = {k for k in candidates if not callers.get(k)}
    changed = bool(hooks)
    while changed:  # the methods only those hooks call
        changed = False
        for key, sites in callers.items():
            if key not in hooks and any(s in hooks for s in sites) and all(
                    s is not None and (s in hooks or s == key) for s in sites):
                hooks.add(key)
                changed = True
    return hooks
