"""Turn a fix into an edit of one whole statement, valid for what the culprit holds.

The doctor knows the statement that keeps adding to a culprit (:mod:`torchmem.doctor.source`)
and, from the run, what the culprit holds (:func:`torchmem.doctor.value_kinds.value_kinds`:
0-dim tensors, tensors, numbers, dicts...). An edit is proposed only when it is valid for
those objects:

* ``.item()`` only when every value the culprit holds is a 0-dim tensor (a tensor of one
  element with more dimensions keeps its shape with ``.detach()``), ``.detach()`` only on
  tensors, ``.clone()`` for views of large storages;
* never on a statement that already stores a detached value (``.detach()``, ``.item()``,
  ``float(...)``), never on an initialisation (``x = []``, ``total = 0``);
* never a ``.detach()``/``.item()`` of a value the script later backpropagates through,
  read back from the culprit (``losses[-1].backward()``: the edit would make it raise;
  :mod:`torchmem.doctor.differentiated`), and no ``.item()`` when tensor methods are
  called on what is read back (``sum(losses).item()``);
* graphs chained across steps are cut by detaching the carried state right *before* the
  iteration's first read of it (``h = h.detach()``; :mod:`torchmem.doctor.chain_entry`),
  so the current step keeps its gradient.

The edit covers the whole statement, multi-line ones included, changes only the stored
expression (the edited file is parsed and compared with the original, node by node), and
keeps the user's formatting. When no edit is valid the fix stays advice, and
:attr:`Proposal.refusal` says why. Never imports torch.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from torchmem.doctor.chain_entry import chain_entry
from torchmem.doctor.differentiated import differentiating_call, tensor_method_call
from torchmem.doctor.source import Statement, parse_path, stem
from torchmem.model.capture import FixEdit

__all__ = ["PathFix", "Proposal", "apply_edit", "path_fix", "propose_edit"]

_TENSORS = frozenset({"0-dim tensor", "tensor"})
#: calls whose result carries no autograd graph
_DETACHING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "detach_"})
_DETACHING_FUNCTIONS = frozenset({"float", "int", "bool", "str", "len", "round"})
#: container methods whose last argument is one value that gets stored
_ONE_VALUE = frozenset({"append", "appendleft", "insert", "add", "put", "put_nowait",
                        "__setitem__"})
_GRAPH_CAUSES = frozenset({"retained_graph", "backward_flags_graph", "eval_graph"})


@dataclass(frozen=True)
class Proposal:
    """The edits proposed for a finding (first is *the* fix), or why there is none."""

    edits: tuple[FixEdit, ...] = ()
    refusal: str | None = None

    @property
    def edit(self) -> FixEdit | None:
        return self.edits[0] if self.edits else None


def apply_edit(source: str, edit: FixEdit) -> str:
    """``source`` with ``edit`` applied (its lines must still read ``edit.original``).

    Raises:
        ValueError: the file changed since the edit was made.
    """
    lines = source.splitlines(keepends=True)
    old = "".join(lines[edit.first_line - 1:edit.last_line])
    if old != edit.original:
        raise ValueError(f"{edit.file}:{edit.first_line} changed since the edit was made")
    return "".join(lines[:edit.first_line - 1]) + edit.replacement + "".join(lines[edit.last_line:])


def _kinds(holds: tuple[str, ...]) -> str:
    return ", ".join(holds) if holds else "values of unknown kind"


def _already_detached(value: ast.AST) -> bool:
    node: ast.AST | None = value
    while True:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _DETACHING_METHODS:
                return True
            if isinstance(func, ast.Name) and func.id in _DETACHING_FUNCTIONS:
                return True
            node = func.value if isinstance(func, ast.Attribute) else None
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return False
        if node is None:
            return False


def _initialisation(value: ast.AST) -> bool:
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and not value.elts:
        return True
    if isinstance(value, ast.Dict) and not value.keys:
        return True
    return (isinstance(value, ast.Call) and not value.args and not value.keywords
            and isinstance(value.func, (ast.Name, ast.Attribute))
            and (stem(value.func) or [""])[-1] in ("list", "dict", "set", "tuple", "deque",
                                                   "OrderedDict"))


class _Source:
    """The file's text and tree, with helpers to cut at AST positions (UTF-8 columns)."""

    def __init__(self, file: str) -> None:
        with open(file, "rb") as fh:
            raw = fh.read()
        self.text = raw.decode("utf-8")
        self.tree = ast.parse(raw, filename=file)
        self.lines = self.text.splitlines(keepends=True)

    def offset(self, line: int, col: int) -> int:
        """Character offset in :attr:`text` of (1-based line, UTF-8 byte column)."""
        before = sum(len(x) for x in self.lines[:line - 1])
        return before + len(self.lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


def _simple_statement(tree: ast.AST, node: ast.AST) -> ast.stmt | None:
    """The innermost statement containing ``node``; None when it is a compound statement
    (the value sits in an ``if``/``for``/``with`` header) or not found."""
    found: ast.stmt | None = None
    for parent in ast.walk(tree):
        if isinstance(parent, ast.stmt) and any(n is node for n in ast.walk(parent)) and (
                found is None or (parent.lineno, -(parent.end_lineno or 0))
                >= (found.lineno, -(found.end_lineno or 0))):
            found = parent
    if found is None or hasattr(found, "body"):
        return None
    return found


def _located(src: _Source, stmt: Statement) -> tuple[ast.stmt, ast.AST | None] | None:
    """The statement node of ``stmt`` and the node of the stored value in it."""
    for node in ast.walk(src.tree):
        if getattr(node, "lineno", None) != stmt.line:
            continue
        value: ast.AST | None = None
        if stmt.kind == "add" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == stmt.method and ast.unparse(node.func.value) == stmt.target:
            value = node.args[-1] if node.args else (node.keywords[0].value if node.keywords else None)
        elif stmt.kind in ("augassign", "setitem", "assign", "rebind") and \
                isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            value = node.value
        elif stmt.kind == "call" and isinstance(node, ast.Call) and stmt.value:
            # the call that hands the kept value to a helper: the argument that carries it
            value = next((a for a in [*node.args, *(k.value for k in node.keywords)]
                          if ast.unparse(a) == stmt.value), None)
            if value is None:
                continue
        else:
            continue
        if value is None:
            return None
        outer = node if isinstance(node, ast.stmt) else _simple_statement(src.tree, node)
        return (outer, value) if outer is not None else None
    return None


def _build(src: _Source, file: str, outer: ast.stmt, new_text: str, expected: list[ast.stmt],
           change: str, shown: str | None = None) -> FixEdit | None:
    """The :class:`FixEdit` replacing ``outer``'s lines with ``new_text``, if the edited file
    parses and its statements there are exactly ``expected``."""
    first, last = outer.lineno, outer.end_lineno or outer.lineno
    original = "".join(src.lines[first - 1:last])
    patched = "".join(src.lines[:first - 1]) + new_text + "".join(src.lines[last:])
    try:
        tree = ast.parse(patched)
    except SyntaxError:
        return None
    count = len(new_text.splitlines())
    got = [ast.dump(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)
           and first <= n.lineno < first + count and n.col_offset == outer.col_offset]
    if got != [ast.dump(e) for e in expected]:
        return None
    shown = shown or ast.unparse(expected[0])
    return FixEdit(file=file, first_line=first, last_line=last, original=original,
                   replacement=new_text, statement=shown, change=change)


def _wrap(src: _Source, stmt: Statement, outer: ast.stmt, value: ast.AST,
          suffix: str) -> FixEdit | None:
    """Append ``suffix`` (``.item()``, ``.detach()``...) to the stored value."""
    start, end = src.span(value)
    text = src.text[start:end]
    plain = isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))
    new_value = f"{text}{suffix}" if plain else f"({text}){suffix}"
    block_start = src.offset(outer.lineno, 0)
    block_end = src.offset(outer.end_lineno or outer.lineno, 0) + len(src.lines[(outer.end_lineno or outer.lineno) - 1])
    block = src.text[block_start:block_end]
    new_text = block[:start - block_start] + new_value + block[end - block_start:]
    expected = copy.deepcopy(outer)
    target = ast.parse(f"({ast.unparse(value)}){suffix}", mode="eval").body
    where = (getattr(value, "lineno", None), getattr(value, "col_offset", None))
    dump = ast.dump(value)

    def same(item: object) -> bool:
        return isinstance(item, ast.AST) and (getattr(item, "lineno", None),
                                              getattr(item, "col_offset", None)) == where \
            and ast.dump(item) == dump

    for node in ast.walk(expected):
        for name, field in ast.iter_fields(node):
            if same(field):
                setattr(node, name, target)
            elif isinstance(field, list):
                field[:] = [target if same(item) else item for item in field]
    change = f"store `{ast.unparse(target)}` instead of `{ast.unparse(value)}`"
    return _build(src, stmt.file, outer, new_text, [expected], change)


def _insert_before(src: _Source, stmt: Statement, outer: ast.stmt, code: str) -> FixEdit | None:
    """Insert the statement ``code`` right before ``outer``, at its indentation."""
    first = src.lines[outer.lineno - 1]
    prefix = first.encode("utf-8")[:outer.col_offset].decode("utf-8", "replace")
    if prefix.strip():  # the statement follows something on its line (`for ...: h = f(h)`)
        return None
    block = "".join(src.lines[outer.lineno - 1:outer.end_lineno or outer.lineno])
    new_text = prefix + code + "\n" + block
    inserted = ast.parse(code).body
    change = f"detach `{code.split(' = ', 1)[0]}` before line {outer.lineno}"
    return _build(src, stmt.file, outer, new_text, [*inserted, copy.deepcopy(outer)], change,
                  shown=code)


def _starts_as_none(tree: ast.AST, target: str) -> bool:
    """Whether the file assigns ``None`` to ``target`` (``state = None`` before a loop)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                and node.value.value is None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t) == target for t in targets):
                return True
    return False


def _chain_target(outer: ast.stmt, name: str) -> str | None:
    """The expression, as written in ``outer``'s targets, that is the culprit ``name``."""
    wanted = parse_path(name)
    targets: list[ast.AST] = []
    if isinstance(outer, ast.Assign):
        stack: list[ast.AST] = list(outer.targets)
        while stack:
            t = stack.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                stack.extend(e.value if isinstance(e, ast.Starred) else e for e in t.elts)
            else:
                targets.append(t)
    elif isinstance(outer, (ast.AugAssign, ast.AnnAssign)):
        targets.append(outer.target)
    for t in targets:
        names = stem(t)
        if names and not isinstance(t, ast.Subscript) and names[-1] == wanted[-1] and \
                (len(names) == 1) == (len(wanted) == 1):
            return ast.unparse(t)
    return None


def propose_edit(cause: str, name: str, stmt: Statement | None, *, holds: tuple[str, ...],
                 culprit_type: str | None = None, has_graph: bool = True) -> Proposal:
    """The edits that fix ``cause`` at ``stmt`` for a culprit holding ``holds``.

    Args:
        cause: the finding's cause.
        name: the culprit as reported (``losses``, ``self.hidden``).
        stmt: the statement that adds to it, or None.
        holds: what the culprit holds (:func:`~torchmem.doctor.value_kinds.value_kinds`).
        culprit_type: the type name of the culprit (``tuple``, ``Tensor``...).
        has_graph: the tensors held carry autograd graphs.

    Returns:
        A :class:`Proposal`: valid edits, best first (the others are fallbacks when the
        first crashes the script), or the reason there is none.
    """
    if stmt is None:
        return Proposal(refusal="no statement of the script adds to it")
    if cause not in _GRAPH_CAUSES | {"view_pins_storage", "hidden_state_chain"}:
        return Proposal(refusal="this cause is not fixed by editing one statement")
    try:
        src = _Source(stmt.file)
    except (OSError, SyntaxError, ValueError):
        return Proposal(refusal=f"cannot read {stmt.file}")
    located = _located(src, stmt)
    if located is None:
        return Proposal(refusal=f"line {stmt.line} is not a simple statement that stores one value")
    outer, value = located
    assert value is not None
    if _initialisation(value):
        return Proposal(refusal=f"line {stmt.line} initialises `{name}`")
    tensors = bool(holds) and set(holds) <= _TENSORS
    if cause == "hidden_state_chain":
        return _chain(src, stmt, outer, name, holds, culprit_type)
    if any(isinstance(t, (ast.Tuple, ast.List)) for t in getattr(outer, "targets", ())):
        return Proposal(refusal=f"line {stmt.line} unpacks several values at once")
    if _already_detached(value):
        return Proposal(refusal=f"line {stmt.line} already stores a value without graph "
                                f"(`{ast.unparse(value)}`): the graph is kept elsewhere")
    if stmt.kind == "add" and stmt.method not in _ONE_VALUE:
        return Proposal(refusal=f"`{stmt.method}` adds many values at once")
    if not tensors:
        return Proposal(refusal=f"`{name}` holds {_kinds(holds)}: `.item()` and `.detach()` "
                                "apply to tensors only")
    if isinstance(value, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Starred)):
        return Proposal(refusal=f"line {stmt.line} stores a literal of several values")
    backward = differentiating_call(stmt, name) if cause in _GRAPH_CAUSES or has_graph else None
    if backward is not None:
        return Proposal(refusal=f"line {backward[0]} (`{backward[1]}`) backpropagates through "
                                f"what `{name}` keeps: a value stored without its graph "
                                "would leave it nothing to differentiate")
    if cause == "view_pins_storage":
        edit = _wrap(src, stmt, outer, value, ".detach().clone()" if has_graph else ".clone()")
        return Proposal(edits=(edit,) if edit else (), refusal=None if edit else "the edit does not parse")
    suffixes = [".detach()"]
    if holds == ("0-dim tensor",) and stmt.kind in ("add", "setitem", "call") \
            and tensor_method_call(stmt, name) is None:  # `sum(kept).item()` needs tensors
        suffixes = [".item()", ".detach()"]  # a number; .detach() when later code needs a tensor
    edits = tuple(e for e in (_wrap(src, stmt, outer, value, s) for s in suffixes) if e is not None)
    return Proposal(edits=edits, refusal=None if edits else "the edit does not parse")


def _chain(src: _Source, stmt: Statement, outer: ast.stmt, name: str,
           holds: tuple[str, ...], culprit_type: str | None) -> Proposal:
    """Detach the carried state right before the statement that carries it; for a write
    into part of a kept tensor (``x[i] = v``: each write links ``x``'s graph to ``v``'s),
    write a value without graph (``x[i] = v.detach()``)."""
    if stmt.kind == "setitem" and holds and set(holds) <= _TENSORS \
            and culprit_type not in ("tuple", "list", "dict"):
        value = _located(src, stmt)
        if value is not None and value[1] is not None and not _already_detached(value[1]):
            edit = _wrap(src, stmt, outer, value[1], ".detach()")
            if edit is not None:
                return Proposal(edits=(edit,))
    if stmt.kind not in ("assign", "augassign", "rebind"):
        return Proposal(refusal=f"line {stmt.line} does not carry `{name}` from step to step")
    target = _chain_target(outer, name)
    if target is None:
        return Proposal(refusal=f"line {stmt.line} does not assign `{name}` as a whole")
    if holds and set(holds) <= _TENSORS and culprit_type not in ("tuple", "list"):
        code = f"{target} = {target}.detach()"
    elif holds and set(holds) <= _TENSORS and culprit_type == "tuple":
        code = f"{target} = tuple(t.detach() for t in {target})"
    elif holds and set(holds) <= _TENSORS and culprit_type == "list":
        code = f"{target} = [t.detach() for t in {target}]"
    else:
        return Proposal(refusal=f"`{name}` holds {_kinds(holds)}: `.detach()` applies to "
                                "tensors only")
    if _starts_as_none(src.tree, target):  # `state = None` before the loop: keep None as is
        code = f"{target} = None if {target} is None else {code.split(' = ', 1)[1]}"
    edit = _insert_before(src, stmt, chain_entry(src.tree, outer, target), code)
    if edit is None:
        return Proposal(refusal=f"line {stmt.line} does not start its own line")
    return Proposal(edits=(edit,))


@dataclass(frozen=True)
class PathFix:
    """A finding's fix: its text, ``edit`` or ``advice``, and the proposed edits."""

    text: str
    kind: str
    proposal: Proposal


def path_fix(cause: str, name: str, stmt: Statement | None, *, holds: tuple[str, ...],
             culprit_type: str | None, has_graph: bool, scalar: bool, is_tuple: bool,
             hook: bool, owner_type: str | None = None, refusal: str | None = None) -> PathFix:
    """The fix of a finding about the culprit ``name``: an edit of ``stmt`` when one is
    valid for what the culprit holds (see :func:`propose_edit`), advice otherwise; advice
    about the object when ``name`` goes inside an object implemented in C
    (``stream.<internal list>``; ``owner_type``: that object's type name). ``refusal``:
    why no edit of ``stmt`` is valid, known beforehand (advice then)."""
    from torchmem.doctor.fixes import advice_text, edit_text, internal_advice
    from torchmem.doctor.internals import internal_owner
    from torchmem.doctor.value_kinds import objects_only

    owner = internal_owner(name)
    if owner is not None:
        return PathFix(internal_advice(owner, owner_type, stmt), "advice",
                       Proposal(refusal="what grows is inside an object implemented in C: "
                                        "no statement of the script stores into it"))

    proposal = Proposal(refusal="hooks are fixed where they are registered") if hook else \
        Proposal(refusal=refusal) if refusal else \
        propose_edit(cause, name, stmt, holds=holds, culprit_type=culprit_type,
                     has_graph=has_graph)
    if proposal.edit is not None:
        alternative = proposal.edits[1] if len(proposal.edits) > 1 else None
        return PathFix(edit_text(cause, proposal.edit, alternative=alternative), "edit", proposal)
    text = advice_text(cause, name, stmt, proposal.refusal, scalar=scalar, is_tuple=is_tuple,
                       has_graph=has_graph, hook=hook, objects=objects_only(holds))
    return PathFix(text, "advice", proposal)
