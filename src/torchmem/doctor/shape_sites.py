"""Where a variable's varying shapes come from, or where they enter the model.

A ``fragmentation`` finding on the CPU names a variable rebound every step to tensors of
varying shapes. Its line is:

* the statement that binds it, when one assignment of its function does: there its shape
  is made (``x = torch.randint(0, n, (20, random.randint(100, 3000)))``);
* when several statements bind it (converted, reshaped and moved in turn:
  ``img = np.float32(raw)``, ``img = torch.from_numpy(img)``, ``img = img.to(device)``),
  or a loop binds it (``for i, tensor in enumerate(loader)``: the shape was made
  elsewhere), the first statement after its last binding that passes it to a call
  (``output = model(tensor)``): where the varying shapes enter the model, the call whose
  memory grows;
* else the last statement that binds it.

Reads the source with :mod:`ast` (cached by :func:`torchmem.doctor.source.load_tree`);
never imports torch.
"""

from __future__ import annotations

import ast
from typing import Iterator

from torchmem.doctor.source import load_tree

__all__ = ["shape_site"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope``'s own body, not those of functions or classes inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _scopes(tree: ast.Module, function: str) -> list[ast.AST]:
    if function == "<module>":
        return [tree]
    return [n for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function]


def _names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _names(elt)
    elif isinstance(target, ast.Starred):
        yield from _names(target.value)


def _binds(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(name in _names(t) for t in node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return name in _names(node.target)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return name in _names(node.target)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return any(i.optional_vars is not None and name in _names(i.optional_vars)
                   for i in node.items)
    return False


def _passes(node: ast.AST, name: str) -> bool:
    """A call that takes the variable itself as an argument."""
    if not isinstance(node, ast.Call):
        return False
    args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
    args += [k.value for k in node.keywords]
    return any(isinstance(a, ast.Name) and a.id == name for a in args)


def _statement_lines(scope: ast.AST) -> dict[int, int]:
    """id of every own node -> line of the innermost statement that contains it (a
    statement comes before the statements inside it, which overwrite its entries)."""
    out: dict[int, int] = {}
    for node in _own_nodes(scope):
        if isinstance(node, ast.stmt):
            for sub in ast.walk(node):
                out[id(sub)] = node.lineno
    return out


def shape_site(file: str | None, function: str | None, name: str) -> tuple[int, str] | None:
    """(line, code) of the statement to name for the variable ``name`` of ``function`` in
    ``file`` (see the module docstring), or None when the source does not say."""
    if not file or not function or not name.isidentifier():
        return None
    loaded = load_tree(file)
    if loaded is None:
        return None
    tree, lines = loaded
    for scope in _scopes(tree, function):
        owner = _statement_lines(scope)
        nodes = list(_own_nodes(scope))
        binders = [n for n in nodes if isinstance(n, ast.stmt) and _binds(n, name)]
        if not binders:
            continue
        bindings = sorted({n.lineno for n in binders})
        line = bindings[0]
        if len(bindings) > 1 or isinstance(binders[0], (ast.For, ast.AsyncFor)):
            calls = sorted(owner.get(id(n), n.lineno) for n in nodes if _passes(n, name))
            line = next((c for c in calls if c > bindings[-1]), bindings[-1])
        code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return line, code
    return None
