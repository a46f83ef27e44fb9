"""From a statement inside a helper to the call a user would change.

A container is often filled by a helper: a meter's ``update(val)`` sums what it is
given, a summary's ``add(d)`` stores the values of a dict, ``log_scalar(key, value)``
hands ``value`` to every active meter. The statement that keeps the values
(:mod:`torchmem.doctor.source`) is then inside the helper, but what it keeps was made
by the caller: the line to change is the call that hands the values over.

:func:`caller_statement` follows the stored value up through the helper's parameters:

1. the stored expression must be *handed in*: built only from the function's
   parameters (arithmetic on them, indexing, iterating over them, calls of plain
   functions on them), not made there by a method call (``self.model(x)``,
   ``z.detach()[::10]``, ``out.softmax(-1)``) or by calling an object the module made
   (``criterion(model(x), y)`` with ``model = Net()`` at module level): then the
   helper's line stays, since that is where the value is made;
2. the function's call sites in the user's files are found by name, kept when their
   arguments fit its signature, and, for a method, when the receiver is not bound to
   another class or a built-in container (``d = OrderedDict()``; ``d.update(x)`` is not
   a call of the user's ``update``); one call site (or one inside a loop) must remain,
   or nothing is lifted;
3. at that call, the arguments for the feeding parameters are looked at: when they are
   bare parameters of the calling function, it is itself a helper and the walk goes on
   (at most :data:`MAX_DEPTH` levels); otherwise this call is the statement returned.

Static, from the source only; never imports torch. Known limitations: calls through
``getattr``, ``functools.partial`` or a stored bound method are not followed; a
function called from several places is not lifted (the line would be a guess), unless
the culprit names the object whose method it is and one call is on that object.
"""

from __future__ import annotations

import ast

from torchmem.doctor.source import Statement, load_tree

__all__ = ["caller_statement", "enclosing_function", "shared_method", "MAX_DEPTH"]

#: how many helper levels are followed up at most
MAX_DEPTH = 4

_CONTAINERS = frozenset({"dict", "list", "set", "tuple", "OrderedDict", "defaultdict", "deque",
                         "Counter", "frozenset"})
_ITERATORS = frozenset({"items", "values", "keys", "get", "pop"})

_Func = ast.FunctionDef | ast.AsyncFunctionDef


def _enclosing(tree: ast.Module, line: int) -> tuple[_Func | None, ast.ClassDef | None]:
    """The innermost function containing ``line`` and the class it is a method of."""
    best: tuple[_Func | None, ast.ClassDef | None] = (None, None)

    def visit(node: ast.AST, cls: ast.ClassDef | None) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = getattr(child, "end_lineno", child.lineno) or child.lineno
                if child.lineno <= line <= end:
                    best = (child, cls)
                    visit(child, None)
            elif isinstance(child, ast.ClassDef):
                visit(child, child)
            else:
                visit(child, cls)

    visit(tree, None)
    return best


def _is_static(func: _Func) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list)


def _params(func: _Func, cls: ast.ClassDef | None) -> list[str]:
    """The parameters a caller passes (``self``/``cls`` of a method left out)."""
    args = [a.arg for a in func.args.posonlyargs + func.args.args]
    if cls is not None and not _is_static(func) and args:
        args = args[1:]
    return args + [a.arg for a in func.args.kwonlyargs]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assignments(func: _Func) -> dict[str, list[ast.AST]]:
    """Local name -> the expressions it is assigned from (for-loop targets: the iterable)."""
    out: dict[str, list[ast.AST]] = {}

    def bind(target: ast.AST, value: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                out.setdefault(n.id, []).append(value)

    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bind(node.target, node.iter)
    return out


def _module_objects(tree: ast.Module) -> frozenset[str]:
    """Names the module binds, outside any function or class, only to what a call made
    (``model = Net().to(device)``, ``criterion = nn.MSELoss()``): objects, not functions."""
    made: set[str] = set()
    other: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                other.add(child.name)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                other.update((a.asname or a.name).split(".")[0] for a in child.names)
            elif isinstance(child, ast.Assign):
                names = {t.id for t in child.targets if isinstance(t, ast.Name)}
                (made if isinstance(child.value, ast.Call) else other).update(names)
            visit(child)

    visit(tree)
    return frozenset(made - other)


def _made_here(node: ast.AST, local: frozenset[str] = frozenset()) -> bool:
    """True when the expression computes with a method call (``self.model(x)``,
    ``z.detach()[::10]``, ``out.softmax(-1)``) or calls something it was given, built
    or that the module made (``local``): its value is made in the function, which is
    where it is changed. Arithmetic, indexing, iterating a dict (``d.items()``) and
    calls of plain functions on what was handed in (``type_as(self.sum, val)``) keep it
    the caller's value."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr not in _ITERATORS:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in local:
            return True  # calls a function it was given or built (`loss_function(*tensors)`)
    return False


def _feeding(value: ast.AST, func: _Func, params: list[str],
             objects: frozenset[str] = frozenset()) -> set[str] | None:
    """The parameters the stored ``value`` is built from, or None when it is made in the
    function (a local computed by the object's own methods or by calling one of the
    module's ``objects``, or no parameter at all)."""
    assigned = _assignments(func)
    seen: set[str] = set()
    found: set[str] = set()

    local = frozenset(params) | frozenset(assigned) | objects

    def walk(expr: ast.AST) -> bool:
        if _made_here(expr, local):
            return False
        for name in _names(expr):
            if name in params and name not in assigned:
                found.add(name)
            elif name in assigned and name not in seen:
                seen.add(name)
                if not all(walk(src) for src in assigned[name]):
                    return False
        return True

    if not walk(value) or not found:
        return None
    return found


def _fits(call: ast.Call, func: _Func, cls: ast.ClassDef | None) -> bool:
    """Whether the call's arguments fit the function's signature."""
    params = _params(func, cls)
    a = func.args
    positional = [x.arg for x in a.posonlyargs + a.args]
    if cls is not None and not _is_static(func) and positional:
        positional = positional[1:]
    if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
        return True  # *args / **kwargs at the call: cannot tell, accept
    if len(call.args) > len(positional) and a.vararg is None:
        return False
    names = {k.arg for k in call.keywords}
    if a.kwarg is None and not names <= set(params):
        return False
    required = positional[:len(positional) - len(a.defaults)]
    given = set(positional[:len(call.args)]) | names
    kw_required = {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None}
    return set(required) <= given and kw_required <= given


def _bound_elsewhere(tree: ast.Module, scope: ast.AST, name: str, cls: ast.ClassDef) -> bool:
    """True when ``name`` is bound in ``scope`` (or at module level) only to instances of
    another class or to built-in containers: its method is not ``cls``'s."""
    makers: list[str] = []
    for where in (scope, tree):
        for node in ast.walk(where):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets):
                v = node.value
                if isinstance(v, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp)):
                    makers.append("dict")
                elif isinstance(v, ast.Call):
                    f = v.func
                    makers.append(f.id if isinstance(f, ast.Name) else
                                  f.attr if isinstance(f, ast.Attribute) else "?")
                else:
                    makers.append("?")
    if not makers or cls.name in makers or "?" in makers:
        return False
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    return all(m in _CONTAINERS or (m in classes and m != cls.name) for m in makers)


def _calls(files: list[str], func: _Func, cls: ast.ClassDef | None
           ) -> list[tuple[str, ast.Module, ast.Call, _Func | None, ast.ClassDef | None, bool]]:
    """Call sites of ``func`` in ``files``: (file, tree, call, calling function, its class,
    inside a loop)."""
    out = []
    for file in dict.fromkeys(files):
        parsed = load_tree(file)
        if parsed is None:
            continue
        tree = parsed[0]

        def visit(node: ast.AST, caller: _Func | None, caller_cls: ast.ClassDef | None,
                  loop: bool) -> None:
            for child in ast.iter_child_nodes(node):
                c_fn, c_cls, c_loop = caller, caller_cls, loop
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    c_fn, c_loop = child, False
                    c_cls = node if isinstance(node, ast.ClassDef) else None
                elif isinstance(child, (ast.For, ast.While, ast.AsyncFor)):
                    c_loop = True
                if isinstance(child, ast.Call) and child is not None and c_fn is not func:
                    f = child.func
                    hit = (isinstance(f, ast.Attribute) and f.attr == func.name and cls is not None) \
                        or (isinstance(f, ast.Name) and f.id == func.name and cls is None)
                    if hit and _fits(child, func, cls):
                        recv = f.value if isinstance(f, ast.Attribute) else None
                        root = recv
                        while isinstance(root, (ast.Attribute, ast.Subscript)):
                            root = root.value
                        if not (cls is not None and isinstance(root, ast.Name)
                                and recv is root and root.id != "self"
                                and _bound_elsewhere(tree, c_fn or tree, root.id, cls)):
                            out.append((file, tree, child, c_fn, c_cls, c_loop))
                visit(child, c_fn, c_cls, c_loop)

        visit(tree, None, None, False)
    return out


def _argument(call: ast.Call, func: _Func, cls: ast.ClassDef | None, param: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == param:
            return k.value
    positional = _params(func, cls)
    if param in positional:
        i = positional.index(param)
        if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
            return call.args[i]
    return None


#: calls whose result is a plain number or size, never a tensor
_NUMBER_CALLS = frozenset({"size", "item", "numel", "dim", "len", "int", "float", "round"})


def _plain_number(node: ast.AST) -> bool:
    """An argument that is plainly a number, not a tensor: ``x.size(0)``, ``len(batch)``,
    ``x.shape[0]``, ``loss.item()`` (of several arguments feeding a kept value, such
    ones carry no tensor: ``meter.update(loss, x.size(0))``)."""
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        return name in _NUMBER_CALLS
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        return node.value.attr == "shape"
    return False


def _statement_at(file: str, lines: tuple[str, ...], call: ast.Call, caller: _Func | None,
                  value: ast.AST | None, in_loop: bool) -> Statement:
    line = call.lineno
    return Statement(file=file, line=line, code=lines[line - 1].strip() if line <= len(lines) else "",
                     kind="call", function=caller.name if caller else "<module>",
                     in_loop=in_loop, value=ast.unparse(value) if value is not None else None,
                     target=None, method=None)


def _stored_value(stmt: Statement) -> ast.AST | None:
    if not stmt.value:
        return None
    try:
        return ast.parse(stmt.value, mode="eval").body
    except SyntaxError:
        return None


def caller_statement(stmt: Statement, files: list[str], receiver: str | None = None
                     ) -> tuple[Statement, list[Statement]] | None:
    """The call that hands ``stmt``'s stored value to the helper it sits in.

    Args:
        stmt: the statement that keeps adding to a culprit.
        files: the user's source files to search for call sites.
        receiver: for a method, the object whose state the culprit is (``losses`` for
            ``losses.sum``): of several call sites of the method, those on that object
            (``losses.update(loss, n)`` among ``batch_time.update(...)`` and others).

    Returns:
        ``(call, chain)``: the call statement a user would change (kind ``call``, its
        ``value`` the argument that carries the stored value) and the helper calls
        passed through on the way (innermost first); None when ``stmt`` keeps what its
        own function made, or the call site is not unique.
    """
    parsed = load_tree(stmt.file)
    value = _stored_value(stmt)
    if parsed is None or value is None:
        return None
    func, cls = _enclosing(parsed[0], stmt.line)
    if func is None:
        return None
    feeding = _feeding(value, func, _params(func, cls), _module_objects(parsed[0]))
    chain: list[Statement] = []
    search = list(dict.fromkeys([stmt.file, *files]))
    for _ in range(MAX_DEPTH):
        if feeding is None or func is None:
            break
        sites = _calls(search, func, cls)
        if len(sites) > 1 and receiver is not None and cls is not None and not chain:
            sites = [s for s in sites if isinstance(s[2].func, ast.Attribute)
                     and ast.unparse(s[2].func.value) == receiver] or sites
        if len(sites) > 1:
            sites = [s for s in sites if s[5]] or sites
        if len(sites) != 1:
            break
        file, tree, call, caller, caller_cls, loop = sites[0]
        args = [a for a in (_argument(call, func, cls, p) for p in sorted(feeding))
                if a is not None and not isinstance(a, ast.Constant)]  # a constant carries nothing
        args = [a for a in args if not _plain_number(a)] or args
        if not args:
            break
        lines = load_tree(file)
        text = lines[1] if lines else ()
        carried = args[0] if len(args) == 1 else ast.Tuple(elts=args, ctx=ast.Load())
        chain.append(_statement_at(file, text, call, caller, carried, loop))
        passed = caller is not None and all(
            isinstance(a, ast.Name) and a.id in _params(caller, caller_cls) for a in args)
        if not passed:
            return chain[-1], chain[:-1]
        feeding = {a.id for a in args if isinstance(a, ast.Name)}
        func, cls = caller, caller_cls
    return None


def enclosing_function(tree: ast.Module, line: int) -> _Func | None:
    """The innermost function of ``tree`` containing ``line`` (None at module level)."""
    return _enclosing(tree, line)[0]


def shared_method(stmt: Statement, files: list[str]) -> bool:
    """Whether ``stmt`` sits in a method that the user's files call at more than one site
    (a meter's ``update`` called for the loss and for the batch time): an edit of the
    method's statement changes what every caller's values go through."""
    parsed = load_tree(stmt.file)
    if parsed is None:
        return False
    func, cls = _enclosing(parsed[0], stmt.line)
    if func is None or cls is None:
        return False
    return len(_calls(list(dict.fromkeys([stmt.file, *files])), func, cls)) > 1
