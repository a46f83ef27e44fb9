"""Which class the elements of a container built in a function are instances of (no torch).

``metrics = {name: AverageMeter(name) for name in names}`` and, in the training loop,
``metrics[k].update(loss_dict[k])``: the summaries resolve ``metrics[k].update`` like
``meter.update`` on a local ``meter = AverageMeter()``, so that a method keeping its argument
on its object is seen through the container. A container counts only when it is built in one
expression whose every element is constructed by the same class, of the file or imported
from another file of the tree:

- a dict, list, tuple or set display (``{"loss": AverageMeter(), "acc": AverageMeter()}``);
- a dict, list or set comprehension (``[AverageMeter() for _ in range(n)]``);
- ``dict(...)`` or ``OrderedDict(...)`` of such a list or generator of ``(key,
  AverageMeter(...))`` pairs, or of keyword arguments (``dict(loss=AverageMeter())``);
- ``defaultdict(AverageMeter)``, which constructs the class for each new key.

The element class is recorded as ``"[]" + class`` next to the plain instances of the
function's flow (``"[]@utils.AverageMeter"`` for a class of another file).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping

__all__ = ["ELEMENTS", "element_class", "subscript_class"]

#: prefix of a container's entry in a flow's ``instances``
ELEMENTS = "[]"
_DICTS = frozenset({"dict", "OrderedDict"})
_PAIRS = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)


def _made(value: ast.AST | None, classes: Collection[str], imports: Mapping[str, str]
          ) -> str | None:
    """The class ``value`` constructs (``C(...)``), ``"@qualified"`` for an imported one."""
    if type(value) is not ast.Call or type(value.func) is not ast.Name:  # type: ignore[union-attr]
        return None
    name = value.func.id  # type: ignore[union-attr]
    if name in classes:
        return name
    if name in imports:
        return "@" + imports[name]
    return None


def _same(found: list[str | None]) -> str | None:
    return found[0] if found and found[0] and all(f == found[0] for f in found) else None


def _pair_values(node: ast.AST) -> list[ast.AST | None] | None:
    """The second elements of ``[(k, v), ...]`` or ``[(k, v) for ...]``."""
    if type(node) is ast.ListComp or type(node) is ast.GeneratorExp:
        elts = [node.elt]  # type: ignore[attr-defined]
    elif type(node) is ast.List or type(node) is ast.Tuple:
        elts = node.elts  # type: ignore[attr-defined]
    else:
        return None
    out: list[ast.AST | None] = []
    for e in elts:
        if type(e) is not ast.Tuple or len(e.elts) != 2:  # type: ignore[attr-defined]
            return None
        out.append(e.elts[1])  # type: ignore[attr-defined]
    return out


def element_class(value: ast.expr, classes: Collection[str], imports: Mapping[str, str]
                  ) -> str | None:
    """``"[]" + class`` when ``value`` builds a container whose every element is an instance
    of one class of ``classes`` (or imported, with ``imports``), else ``None``."""
    t = type(value)
    elts: list[ast.AST | None] | None = None
    if t is ast.Dict:
        elts = list(value.values)  # type: ignore[attr-defined]
    elif t is ast.List or t is ast.Tuple or t is ast.Set:
        elts = list(value.elts)  # type: ignore[attr-defined]
    elif t is ast.DictComp:
        elts = [value.value]  # type: ignore[attr-defined]
    elif t is ast.ListComp or t is ast.SetComp:
        elts = [value.elt]  # type: ignore[attr-defined]
    elif t is ast.Call:
        func = value.func  # type: ignore[attr-defined]
        name = func.id if type(func) is ast.Name else \
            func.attr if type(func) is ast.Attribute else ""  # type: ignore[attr-defined]
        args = value.args  # type: ignore[attr-defined]
        keywords = value.keywords  # type: ignore[attr-defined]
        if name == "defaultdict" and len(args) >= 1 and type(args[0]) is ast.Name:
            cls = args[0].id if args[0].id in classes else \
                "@" + imports[args[0].id] if args[0].id in imports else None
            return ELEMENTS + cls if cls else None
        if name in _DICTS:
            if len(args) == 1 and not keywords:
                elts = _pair_values(args[0])
            elif not args and keywords and all(kw.arg for kw in keywords):
                elts = [kw.value for kw in keywords]
    if not elts:
        return None
    cls = _same([_made(e, classes, imports) for e in elts])
    return ELEMENTS + cls if cls else None


def subscript_class(node: ast.AST, instances: Mapping[str, str]) -> str | None:
    """The class ``name[key]`` (``node``) holds an instance of, when ``name`` is a container
    recorded by :func:`element_class` in the flow's ``instances``."""
    if type(node) is not ast.Subscript or \
            type(node.value) is not ast.Name:  # type: ignore[attr-defined]
        return None
    found = instances.get(node.value.id, "")  # type: ignore[attr-defined]
    return found[len(ELEMENTS):] if found.startswith(ELEMENTS) else None
