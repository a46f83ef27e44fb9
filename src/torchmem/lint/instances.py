"""Which class an attribute of ``self`` holds an instance of (no torch).

``self.losses = AverageMeter()`` in ``__init__`` and ``self.losses.update(loss)`` in the
training loop: :func:`attribute_classes` tells the summaries that ``self.losses`` is an
``AverageMeter``, so that ``update`` is summarised like a method called on a local
instance. An attribute counts only when every assignment to it in the class's own
methods constructs the same class, of this file or imported from another file of the tree
(``"@utils.AverageMeter"``, resolved later, like a local ``meter = AverageMeter()``).

:func:`module_instances` does the same for the names of a script's top level
(``train_util = Trainer(model)`` under ``if __name__ == "__main__":``, used by a function
of the file that does not bind the name itself).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING

from torchmem.lint.children import all_statements, walk
from torchmem.lint.containers import subscript_class

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.dataflow import Flow
    from torchmem.lint.summaries import Summaries

__all__ = ["attribute_class", "attribute_classes", "module_instances"]

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _constructed(value: ast.AST | None, local: Mapping[str, ast.ClassDef],
                 imports: Mapping[str, str]) -> str | None:
    if type(value) is not ast.Call or type(value.func) is not ast.Name:  # type: ignore[union-attr]
        return None
    name = value.func.id  # type: ignore[union-attr]
    if name in local:
        return name
    if name in imports:
        return "@" + imports[name]
    return None


def attribute_classes(cls: ast.ClassDef, local: Mapping[str, ast.ClassDef],
                      imports: Mapping[str, str]) -> dict[str, str]:
    """``{"losses": "AverageMeter"}`` for the attributes of ``self`` that every assignment
    in the methods of ``cls`` binds to an instance of one class (``"@qualified"`` for a
    class imported from another file)."""
    seen: dict[str, str | None] = {}
    for method in cls.body:
        if not isinstance(method, _FUNCS):
            continue
        for node in all_statements(method):  # assignments are statements
            t = type(node)
            if t is ast.Assign:
                targets, value = node.targets, node.value  # type: ignore[attr-defined]
            elif t is ast.AnnAssign or t is ast.AugAssign:
                targets, value = [node.target], None  # type: ignore[attr-defined]
                if t is ast.AnnAssign:
                    value = node.value  # type: ignore[attr-defined]
            else:
                continue
            for target in targets:
                for sub in walk(target):
                    if type(sub) is ast.Attribute and type(sub.value) is ast.Name and \
                            sub.value.id == "self":
                        made = _constructed(value, local, imports) if sub is target else None
                        attr = sub.attr
                        seen[attr] = made if attr not in seen or seen[attr] == made else None
    return {k: v for k, v in seen.items() if v}


def module_instances(tree: ast.Module, local: Mapping[str, ast.ClassDef]) -> dict[str, str]:
    """``{"train_util": "FasterRCNNTrainer"}`` for the names that every binding at the top
    level of ``tree`` (outside functions and classes, inside ``if``/``with``/``try``/loops)
    binds to an instance of one class of the file; a name also bound otherwise there (a
    loop or ``with`` target, an import, another value) is left out."""
    seen: dict[str, str | None] = {}

    def bind(target: ast.AST, made: str | None) -> None:
        for sub in walk(target):
            if type(sub) is ast.Name:
                name = sub.id
                mine = made if sub is target else None
                seen[name] = mine if name not in seen or seen[name] == mine else None

    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        t = type(node)
        if t in _FUNCS or t is ast.ClassDef:
            seen[node.name] = None  # type: ignore[attr-defined]
            continue
        if t is ast.Assign:
            made = _constructed(node.value, local, {})  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                bind(target, made)
        elif t is ast.AnnAssign or t is ast.AugAssign:
            value = node.value if t is ast.AnnAssign else None  # type: ignore[attr-defined]
            bind(node.target, _constructed(value, local, {}))  # type: ignore[attr-defined]
        elif t is ast.For or t is ast.AsyncFor:
            bind(node.target, None)  # type: ignore[attr-defined]
        elif t is ast.With or t is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
        elif t is ast.Import or t is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                seen[(alias.asname or alias.name).partition(".")[0]] = None
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if block.__class__ is list:
                for item in block:
                    if type(item) is ast.ExceptHandler:
                        if item.name:
                            seen[item.name] = None
                        todo.extend(item.body)
                    else:
                        todo.append(item)
    return {k: v for k, v in seen.items() if v}


def attribute_class(summaries: Summaries, node: ast.AST, flow: Flow) -> str | None:
    """The class ``self.X`` (``node``) holds an instance of, in a method of a class of the
    file ``summaries`` describes (memoised per class), or ``name[key]`` when ``name`` is a
    container of instances of one class (:mod:`torchmem.lint.containers`)."""
    held = subscript_class(node, flow.instances)  # metrics[k] of metrics = {k: Meter()}
    if held is not None:
        return held
    cls = summaries.classes.get(flow.ctx.fn.class_name or "")
    if cls is None or type(node) is not ast.Attribute or type(node.value) is not ast.Name \
            or node.value.id != "self":  # type: ignore[attr-defined]
        return None
    found = summaries._attr_classes.get(id(cls))
    if found is None:
        imports = flow.ctx.imports if summaries.follow_imports else {}
        found = summaries._attr_classes[id(cls)] = attribute_classes(
            cls, summaries.classes, imports)
    return found.get(node.attr)  # type: ignore[attr-defined]
