"""A statement that stores into one entry of a container chosen by a variable key also
stores into its siblings.

``self.statistics[key].append(value)`` in a collector's ``__setitem__`` keeps the loss
tensor under ``'loss'`` and, through the same line, ints under ``'epoch'`` and
``'batch_size'``. An edit of the stored value there (``value.detach()``) would raise for
the ints. :func:`sibling_refusal` reads, in the analysed snapshot, what the culprit's
siblings hold (the entries of the same container, at the same depth): when one holds
values that are not tensors and the statement's target picks the entry with a variable
key, no edit of that statement is offered, and the reason names the sibling. When the
statement sits in a class's ``__setitem__``, :func:`setitem_site` finds the one item
assignment that stores under the culprit's key (``stat_col['loss'] = loss``), where the
edit touches that entry alone.

A statement that rebinds the whole container (``tot = tot * 0.99 + info``, where ``tot``
is a dict of metrics and the culprit ``tot['loss']`` one of its entries) stores the
container, not the entry: ``.detach()`` or ``.item()`` of its value would raise.
:func:`whole_container_refusal` says so when the container is not a tensor, a tuple or a
list (those the hidden-state fix rebuilds element by element). Never imports torch.
"""

from __future__ import annotations

import ast
from typing import Mapping, Sequence

from torchmem.doctor.call_sites import enclosing_function
from torchmem.doctor.key_origin import last_key
from torchmem.doctor.pathstats import PathStats
from torchmem.doctor.source import Statement, load_tree

__all__ = ["setitem_site", "sibling_refusal", "whole_container_refusal"]

_TENSORS = frozenset({"0-dim tensor", "tensor"})


def _variable_key(target: str | None) -> bool:
    """Whether ``target`` (``self.statistics[key]``) picks an entry with a non-constant key."""
    if not target:
        return False
    try:
        node = ast.parse(target, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant)


def sibling_refusal(path: str, stmt: Statement | None, paths: Mapping[str, PathStats]) -> str | None:
    """Why no edit of ``stmt`` is valid because it also stores non-tensors into a sibling
    of ``path`` (None: no such sibling, or the statement does not pick its entry by a
    variable key).

    Example:
        >>> from torchmem.doctor.pathstats import PathStats
        >>> s = Statement("t.py", 9, "self.stats[key].append(value)", "add", "__setitem__",
        ...               False, "value", "self.stats[key]", "append")
        >>> kept = PathStats(path="c.stats['loss']", kind="container", type="list", depth=2,
        ...                  root="c", holds=("0-dim tensor",))
        >>> epoch = PathStats(path="c.stats['epoch']", kind="container", type="list", depth=2,
        ...                   root="c", holds=("number",))
        >>> sibling_refusal("c.stats['loss']", s, {p.path: p for p in (kept, epoch)})
        "line 9 also stores number into `c.stats['epoch']`: `.item()` or `.detach()` there would raise for those"
    """
    if stmt is None or not path.endswith("]") or "[" not in path or not _variable_key(stmt.target):
        return None
    parent = path[:path.rindex("[")]
    own = paths.get(path)
    depth = own.depth if own is not None else None
    for other, stats in paths.items():
        if other == path or not other.startswith(parent + "[") or "[" in other[len(parent) + 1:]:
            continue
        if depth is not None and stats.depth != depth:
            continue
        kinds = tuple(k for k in stats.holds if k not in _TENSORS)
        if kinds:
            return (f"line {stmt.line} also stores {', '.join(kinds)} into `{other}`: "
                    "`.item()` or `.detach()` there would raise for those")
    return None


def whole_container_refusal(path: str, stmt: Statement | None,
                            paths: Mapping[str, PathStats]) -> str | None:
    """Why no edit of ``stmt`` is valid because it binds the container whose entry the
    culprit ``path`` is (``tot = tot * 0.99 + info`` for ``tot['loss']``), and that
    container is neither a tensor nor a tuple or list (None otherwise). A container the
    snapshot did not measure counts as one whose type is unknown: refused too.

    Example:
        >>> s = Statement("t.py", 30, "tot = tot * 0.99 + info", "assign", "<module>",
        ...               True, "tot * 0.99 + info", "tot")
        >>> tot = PathStats(path="tot", kind="global", type="Tracker", depth=0, root="tot")
        >>> whole_container_refusal("tot['loss']", s, {"tot": tot})
        "line 30 rebinds `tot` (a Tracker) as a whole, not its entry `tot['loss']`: `.item()` or `.detach()` of that value would raise"
    """
    if stmt is None or stmt.kind not in ("assign", "rebind", "augassign") or not stmt.target:
        return None
    if not path.endswith("]") or "[" not in path or stmt.target.endswith("]"):
        return None
    parent = paths.get(path[:path.rindex("[")])
    kind = parent.type if parent is not None else None
    if kind in ("Tensor", "Parameter", "tuple", "list"):
        return None
    what = f"(a {kind})" if kind else "(of a type the analysis did not see)"
    return (f"line {stmt.line} rebinds `{stmt.target}` {what} as a whole, not its entry "
            f"`{path}`: `.item()` or `.detach()` of that value would raise")


def setitem_site(path: str, stmt: Statement | None, files: Sequence[str]) -> Statement | None:
    """For a statement inside a class's ``__setitem__`` (``self.statistics[key].append(value)``),
    the one item assignment of the user's files that stores under the culprit's constant
    key (``stat_col['loss'] = loss``): there the value can be reduced or detached for this
    entry alone. None when there is no such unique assignment."""
    if stmt is None or stmt.function != "__setitem__":
        return None
    key = last_key(path)
    if key is None:
        return None
    found: list[tuple[str, tuple[str, ...], ast.Module, ast.Assign]] = []
    for file in dict.fromkeys(files):
        parsed = load_tree(file)
        if parsed is None:
            continue
        for node in ast.walk(parsed[0]):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Subscript) \
                    and isinstance(node.targets[0].slice, ast.Constant) \
                    and node.targets[0].slice.value == key \
                    and not isinstance(node.value, ast.Constant):
                found.append((file, parsed[1], parsed[0], node))
    if len(found) != 1:
        return None
    file, text, tree, node = found[0]
    code = text[node.lineno - 1].strip() if node.lineno <= len(text) else ""
    func = enclosing_function(tree, node.lineno)
    return Statement(file=file, line=node.lineno, code=code, kind="setitem",
                     function=func.name if func is not None else "<module>", in_loop=False,
                     value=ast.unparse(node.value), target=ast.unparse(node.targets[0]),
                     method=None)
