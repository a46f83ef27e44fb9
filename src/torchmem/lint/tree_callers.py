"""Callers in other files of the linted tree: the top-level functions that every other
file calls only with autograd recording off (no torch).

``evaluate(model, loader)`` in ``utils.py`` has no ``no_grad``, but ``train.py`` calls it as
``with torch.no_grad(): evaluate(model, dev)``. Linted alone, ``utils.py``'s forward passes
look like they record a graph. When a whole tree is linted and such a function holds a
finding, :func:`no_grad_callees` reads the other files' uses of it, so that the engine
judges it like a function whose every call in its own file runs under ``no_grad``
(:func:`torchmem.lint.callers.no_grad_functions`): the calls of the function's own file
must run so too.

What is resolved:
    calls of a top-level function through ``from mod import f`` (``as`` names too,
    relative or absolute, looked up like :mod:`torchmem.lint.imported` does) and
    ``import pkg.mod as m; m.f(...)``, made inside a ``with torch.no_grad():`` /
    ``inference_mode()`` block or in a function decorated so, in the files being linted.
What is not (the function keeps its own grad mode):
    a call made anywhere else, even from a function that is itself only called under
    ``no_grad``; the function used as a value in another file (``map(f, ...)``, a
    callback, a ``lambda``); a file that uses the name without an import resolved here
    (a star import, a name imported inside a function, a parameter of that name, a
    re-export through ``__init__.py``); a notebook or a file too large to parse that
    holds the name; methods; calls from outside the linted tree.

Cost: nothing until a top-level function holds a finding; then the tree's files are read
once per process, and the files whose text holds the function's name are parsed, those
that can call it under ``no_grad`` first (the search ends when none does).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable

from torchmem.lint.callers import mentions_no_grad
from torchmem.lint.children import child_nodes
from torchmem.lint.context import Context
from torchmem.lint.facts import key_of
from torchmem.lint.imported import MAX_BYTES, NOT_LOCAL, import_candidates
from torchmem.lint.knowledge import NO_GRAD_CONTEXTS, is_no_grad_decorator

__all__ = ["forget_trees", "no_grad_callees"]

_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
#: (defining file, function name)
_Target = tuple[str, str]
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from|import)[ \t][^\n]*", re.M)
#: the same lines after the first: anchored on the newline, which the search skips to
_NEXT_IMPORT_LINE = re.compile(rb"\n([ \t]*(?:from|import)[ \t][^\n]*)")
#: the file of a target that a file of the tree imports without defining it
_ELSEWHERE = ""


class _FileUses:
    """What one file does with the functions of other files of the tree."""

    __slots__ = ("calls", "unbound")

    def __init__(self) -> None:
        #: target -> one bool per use: True for a call under ``no_grad``
        self.calls: dict[_Target, list[bool]] = {}
        #: names loaded without a resolved binding (nor a ``def``/``class`` of the file)
        self.unbound: set[str] = set()


class _Tree:
    """The files of one linted tree, read and walked when a lookup first needs them."""

    def __init__(self, files: tuple[str, ...]) -> None:
        self.files = files
        self.texts: dict[str, bytes] | None = None
        #: notebooks and files too large to parse: their callers are unknown
        self.unread: list[bytes] = []
        self.uses: dict[str, _FileUses | None] = {}
        self.quiet: dict[_Target, bool] = {}
        self.resolve: _Resolver | None = None
        #: files that mention ``no_grad`` -> the words of their import lines
        self.imports: dict[str, frozenset[bytes]] | None = None

    def read(self) -> dict[str, bytes]:
        if self.texts is None:
            self.texts = {}
            for path in self.files:
                try:
                    with open(path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                if path.endswith(".py") and len(data) <= MAX_BYTES:
                    self.texts[os.path.abspath(path)] = data
                else:
                    self.unread.append(data)
            self.resolve = _Resolver(self.texts)
        return self.texts

    def is_quiet(self, target: _Target) -> bool:
        if target not in self.quiet:
            self.quiet[target] = self._judge(target)
        return self.quiet[target]

    def _judge(self, target: _Target) -> bool:
        where, name = target
        texts = self.read()
        word = name.encode()
        if any(word in data for data in self.unread):
            return False
        # first the files that can call it under no_grad: those with its name and an
        # import line naming it or its module (a call through an import that this misses
        # is not counted, which leaves the function as it was)
        stem = os.path.splitext(os.path.basename(where))[0]
        if stem == "__init__":
            stem = os.path.basename(os.path.dirname(where))
        name_words = {word, stem.encode()}
        callers = [path for path, imported in self.no_grad_imports().items()
                   if path != where and not imported.isdisjoint(name_words)
                   and word in texts[path]]
        if not any(any(self._sites(path, target) or ()) for path in callers):
            return False  # no call under no_grad: the usual answer, nothing else read
        pattern = re.compile(rb"\b" + re.escape(word) + rb"\b")
        for path, data in texts.items():
            if path != where and word in data and pattern.search(data):
                found = self._sites(path, target)
                if found is None or not all(found):
                    return False
        return True

    def no_grad_imports(self) -> dict[str, frozenset[bytes]]:
        """The words of the lines that start with ``import`` or ``from``, for each file of
        the tree that mentions ``no_grad`` (the name itself is then looked for as bytes: a
        file that only contains it inside a longer word is walked for nothing, no more)."""
        if self.imports is None:
            self.imports = {path: frozenset(_WORD.findall(b"\n".join(_import_lines(data))))
                            for path, data in self.read().items() if mentions_no_grad(data)}
        return self.imports

    def _sites(self, path: str, target: _Target) -> list[bool] | None:
        """One bool per use of ``target`` in the file (True: a call under ``no_grad``);
        ``None`` when the file may use it unseen (its name without a resolved import)."""
        if path not in self.uses:
            assert self.resolve is not None and self.texts is not None
            self.uses[path] = _walk(path, self.texts[path], self.resolve)
        uses = self.uses[path]
        if uses is None:
            return []  # not valid Python: it cannot run
        return None if target[1] in uses.unbound else uses.calls.get(target, [])


def _import_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` that start with ``import`` or ``from`` (what
    ``_IMPORT_LINE.findall`` finds, without trying a match at every byte)."""
    first = _IMPORT_LINE.match(data)
    rest = _NEXT_IMPORT_LINE.findall(data)
    return [first.group(0), *rest] if first else rest


_TREES: dict[tuple[str, ...], _Tree] = {}


def forget_trees() -> None:
    """Drop what was read of the trees linted before (their files may have changed)."""
    _TREES.clear()


def no_grad_callees(path: str, names: Iterable[str], files: tuple[str, ...]
                    ) -> frozenset[str]:
    """The names among ``names`` of top-level functions of the file ``path`` that the
    other files of the linted tree ``files`` call, always under ``no_grad``, and never use
    otherwise. The tree's files are read and walked once per process, when first needed."""
    tree = _TREES.get(files)
    if tree is None:
        _TREES.clear()  # one tree per run
        tree = _TREES[files] = _Tree(files)
    where = os.path.abspath(path)
    return frozenset(name for name in names if tree.is_quiet((where, name)))


class _Resolver:
    """Qualified imported names to ``(file of the tree, name)``, memoised per directory."""

    def __init__(self, texts: dict[str, bytes]) -> None:
        self.texts = texts
        self.memo: dict[tuple[str, str], _Target | None] = {}

    def __call__(self, importer: str, qualified: str) -> _Target | None:
        if qualified.partition(".")[0].lstrip(".") in NOT_LOCAL or "." not in qualified:
            return None
        key = (os.path.dirname(importer), qualified)
        if key not in self.memo:
            self.memo[key] = self._find(importer, qualified)
        return self.memo[key]

    def _find(self, importer: str, qualified: str) -> _Target | None:
        for path, name in import_candidates(importer, qualified):
            data = self.texts.get(path)
            if data is not None:
                # a name of the tree's file that it does not define: maybe re-exported
                return (path, name) if b"def " + name.encode() in data else (_ELSEWHERE, name)
            if os.path.isfile(path):
                return None  # a file that is not linted: its callers are not ours
        return None


def _walk(path: str, data: bytes, resolve: _Resolver) -> _FileUses | None:
    """What the file at ``path`` does with the tree's functions; ``None`` when it cannot
    be parsed."""
    try:
        tree = ast.parse(data, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    ctx = Context("", path)
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            ctx.add_import(stmt)
    imports = ctx.imports
    # the names bound to something that may be a module or function of the tree
    local = {name for name, q in imports.items()
             if q.partition(".")[0].lstrip(".") not in NOT_LOCAL}
    uses = _FileUses()
    defined: set[str] = set()
    unbound: set[str] = set()
    qualname = ctx.qualname

    def target_of(expr: ast.expr) -> _Target | None:
        root = expr
        while type(root) is ast.Attribute:
            root = root.value  # type: ignore[attr-defined]
        if type(root) is not ast.Name or root.id not in local:  # type: ignore[attr-defined]
            return None
        q = qualname(expr)
        target = resolve(path, q) if q else None
        if target is not None and target[0] == _ELSEWHERE:
            unbound.add(target[1])  # a re-export: which function it is, is not known
            return None
        return target

    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    push = todo.append
    while todo:
        node, no_grad = todo.pop()
        t = type(node)
        if t is ast.Name:
            target = target_of(node)  # type: ignore[arg-type]
            if target is not None:
                uses.calls.setdefault(target, []).append(False)  # used as a value
            elif node.id not in imports:  # type: ignore[attr-defined]
                unbound.add(node.id)  # type: ignore[attr-defined]
            continue
        if t is ast.Constant:
            continue
        if t in _FUNC_TYPES or t is ast.ClassDef or t is ast.Lambda:
            if t is not ast.Lambda:
                defined.add(node.name)  # type: ignore[attr-defined]
            inner = t in _FUNC_TYPES and any(is_no_grad_decorator(
                qualname(d.func if type(d) is ast.Call else d)
                or key_of(d.func if type(d) is ast.Call else d))
                for d in node.decorator_list)  # type: ignore[attr-defined]
            for child in child_nodes(node):
                # a function's or lambda's body runs later, with the grad mode of then
                push((child, no_grad if t is ast.ClassDef else inner))
            continue
        if t is ast.With or t is ast.AsyncWith:
            on = no_grad or any(
                type(i.context_expr) is ast.Call and qualname(
                    i.context_expr.func) in NO_GRAD_CONTEXTS  # type: ignore[attr-defined]
                for i in node.items)  # type: ignore[attr-defined]
            for item in node.items:  # type: ignore[attr-defined]
                push((item, no_grad))
            for stmt in node.body:  # type: ignore[attr-defined]
                push((stmt, on))
            continue
        if t is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            target = target_of(func) if type(func) in (ast.Name, ast.Attribute) else None
            if target is not None:
                uses.calls.setdefault(target, []).append(no_grad)
                for arg in node.args:  # type: ignore[attr-defined]
                    push((arg, no_grad))
                for kw in node.keywords:  # type: ignore[attr-defined]
                    push((kw.value, no_grad))
                continue
        elif t is ast.Attribute:
            target = target_of(node)  # type: ignore[arg-type]
            if target is not None:
                uses.calls.setdefault(target, []).append(False)
                continue
        for child in child_nodes(node):
            push((child, no_grad))
    uses.unbound = unbound - defined
    return uses
