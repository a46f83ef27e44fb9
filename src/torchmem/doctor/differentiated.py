"""Whether the script still needs what a culprit keeps as tensors with their graphs.

Detaching the value a statement stores (``losses.append(loss.detach())``) is a fix only
when nothing later needs that value's graph. When the script starts a backward from what
it reads back out of the culprit (``losses[-1].backward(retain_graph=True)``,
``sum(losses).backward()``, ``torch.autograd.grad(self.total, params)``), the detached
value has no graph and the backward raises, so the edit must not be proposed.

:func:`differentiating_call` finds such a call in the culprit's scope: the receiver of
``.backward()``, or the first argument (``tensors=``/``outputs=``) of
``torch.autograd.backward``/``torch.autograd.grad``, that reads the culprit, directly or
through local names bound from it (``last = losses[-1]``, ``for l in losses``, followed to
a fixed point). A bare name is looked up in the function that stores into it when it is a local
there, else in the whole file (a module global); an attribute path (``self.history``) in every
function of the file, matched by its last names as :mod:`torchmem.doctor.source` matches
them. A backward from another reference to the stored object
(``losses.append(loss)`` then ``loss.backward()``) does not read the culprit, and the
edit stays valid.

:func:`tensor_method_call` finds, the same way, a tensor method called on a value read back
from the culprit (``sum(losses).item()``, ``losses[-1].cpu()``, also through a
comprehension's own names): storing numbers (``.item()``) would make it raise, so only
``.detach()`` is proposed.

Pure ``ast`` work; never imports torch.
"""

from __future__ import annotations

import ast

from torchmem.doctor.source import Statement, _matches, load_tree, parse_path
from torchmem.doctor.source_flow import function_parameters

__all__ = ["differentiating_call", "tensor_method_call"]

#: ``torch.autograd`` functions whose first argument is the root of a backward
_AUTOGRAD_FUNCTIONS = frozenset({"backward", "grad"})
#: the keyword naming that root
_ROOT_KEYWORDS = frozenset({"tensors", "outputs"})
#: calls whose result carries no graph: a name bound from them does not carry the culprit's
_PLAIN_METHODS = frozenset({"detach", "item", "tolist", "numpy", "size", "dim", "numel"})
_PLAIN_FUNCTIONS = frozenset({"len", "float", "int", "bool", "str", "round", "print",
                              "isinstance", "range", "enumerate"})


def _root(call: ast.Call) -> ast.AST | None:
    """The expression a backward call starts from, or None when ``call`` is not one."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward" and not _autograd(func.value):
        return func.value  # x.backward(...)
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    if name not in _AUTOGRAD_FUNCTIONS:
        return None
    if isinstance(func, ast.Attribute) and not _autograd(func.value):
        return None
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in _ROOT_KEYWORDS), None)


def _autograd(node: ast.AST) -> bool:
    """``torch.autograd`` or ``autograd`` (as imported)."""
    return (isinstance(node, ast.Attribute) and node.attr == "autograd") or (
        isinstance(node, ast.Name) and node.id == "autograd")


def _scope(tree: ast.Module, stmt: Statement, wanted: list[str]) -> ast.AST:
    """Where the culprit is visible: the storing function for a local, else the file."""
    if len(wanted) > 1 or stmt.function == "<module>":
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name == stmt.function \
                and node.lineno <= stmt.line <= (node.end_lineno or node.lineno):
            return node if _local(node, wanted[0]) else tree
    return tree


def _local(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``name`` is a local of ``function``: an argument or bound in its body, not
    declared ``global``/``nonlocal`` (else it is the module's or an outer function's)."""
    if name in function_parameters(function):
        return True
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               for n in ast.walk(function))


def _bindings(scope: ast.AST) -> list[tuple[list[str], ast.AST]]:
    """(names bound, expression they are bound from) for every simple binding in scope."""
    out: list[tuple[list[str], ast.AST]] = []

    def names(target: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]

    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            out.append(([n for t in node.targets for n in names(t)], node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            out.append((names(node.target), node.value))
        elif isinstance(node, ast.NamedExpr):
            out.append((names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            # (a comprehension's names are its own: the comprehension as a whole carries
            # what it iterates over)
            out.append((names(node.target), node.iter))
    return out


def _plain(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr in _PLAIN_METHODS
    return isinstance(func, ast.Name) and func.id in _PLAIN_FUNCTIONS


def _carries(value: ast.AST, readers: list[list[str]]) -> bool:
    """Whether ``value`` reads one of ``readers`` other than through a call whose result
    has no graph (``len(losses)``, ``losses[-1].item()``)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if _plain(node):
            continue
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and any(
                _matches(node, r) for r in readers):
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


#: methods of tensors that a Python number lacks: called on a value read back from the
#: culprit, they fail once the culprit keeps numbers (``sum(losses).item()``)
_TENSOR_METHODS = frozenset({"item", "detach", "cpu", "cuda", "to", "numpy", "tolist",
                             "backward", "mean", "sum", "clone", "view", "reshape", "size",
                             "dim", "numel", "float", "double", "squeeze", "unsqueeze"})


def _readers(stmt: Statement, name: str
             ) -> tuple[ast.AST, list[list[str]], tuple[str, ...], list[str]] | None:
    """(scope, names that carry the culprit's values, the file's lines, the culprit's names)."""
    loaded = load_tree(stmt.file)
    wanted = parse_path(stmt.target or name)
    if loaded is None or not wanted:
        return None
    tree, lines = loaded
    scope = _scope(tree, stmt, wanted)
    readers = [wanted]
    bindings = _bindings(scope)
    changed = True
    while changed:  # local names bound from the culprit, or from such names
        changed = False
        for targets, value in bindings:
            if _carries(value, readers):
                for t in targets:
                    if [t] not in readers and [t] != wanted:
                        readers.append([t])
                        changed = True
    return scope, readers, lines, wanted


def tensor_method_call(stmt: Statement, name: str) -> tuple[int, str] | None:
    """The first call of a tensor method on a value read back from the culprit ``name``
    (``sum(losses).item()``, ``losses[-1].cpu()``), as ``(line, code)``: storing numbers
    (``.item()``) there would make it raise. None when there is none."""
    found = _readers(stmt, name)
    if found is None:
        return None
    scope, readers, lines, wanted = found
    # a comprehension over what is kept: its own names carry the values inside it
    # (`sum(x.item() for x in kept)`)
    parts: list[tuple[ast.AST, list[list[str]]]] = [(scope, readers)]
    for comp in ast.walk(scope):
        if isinstance(comp, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = [[n.id] for g in comp.generators if _carries(g.iter, readers)
                     for n in ast.walk(g.target) if isinstance(n, ast.Name)]
            if inner:
                parts.append((comp, readers + inner))
    hits = []
    for part, carriers in parts:
        for node in ast.walk(part):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _TENSOR_METHODS:
                receiver = node.func.value
                if not _matches_exactly(receiver, wanted) and _carries(receiver, carriers):
                    hits.append(node.lineno)
    if not hits:
        return None
    line = min(hits)
    return line, lines[line - 1].strip() if line <= len(lines) else ""


def _matches_exactly(node: ast.AST, wanted: list[str]) -> bool:
    """``node`` is the culprit itself (``losses``), not a value read out of it."""
    return not isinstance(node, ast.Subscript) and _matches(node, wanted)


def differentiating_call(stmt: Statement, name: str) -> tuple[int, str] | None:
    """The first backward in ``stmt``'s file that starts from what the culprit ``name``
    keeps, as ``(line, code)``; None when there is none (or the file cannot be read).

    Example:
        >>> import tempfile, os
        >>> src = ("losses = []\\nfor i in range(3):\\n    losses.append(f(i))\\n"
        ...        "    losses[-1].backward()\\n")
        >>> with tempfile.NamedTemporaryFile('w', suffix='.py', delete=False) as fh:
        ...     _ = fh.write(src)
        >>> s = Statement(fh.name, 3, "losses.append(f(i))", "add", "<module>", True, "f(i)",
        ...               "losses", "append")
        >>> differentiating_call(s, "losses")
        (4, 'losses[-1].backward()')
        >>> os.remove(fh.name)
    """
    loaded = _readers(stmt, name)
    if loaded is None:
        return None
    scope, readers, lines, _ = loaded
    found = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and (root := _root(node)) is not None \
                and _carries(root, readers):
            found.append(node.lineno)
    if not found:
        return None
    line = min(found)
    return line, lines[line - 1].strip() if line <= len(lines) else ""
