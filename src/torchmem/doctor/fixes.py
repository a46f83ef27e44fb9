"""The fix text for each cause, built from the user's own statement when it is known.

Pure string work (no torch). Each function takes what the diagnosis found (the
statement that keeps adding to the culprit, the culprit's name, whether it holds a
scalar or a tuple) and returns one or two sentences with the code to write.
"""

from __future__ import annotations

import re

from torchmem.doctor.source import Statement
from torchmem.model.capture import FixEdit

__all__ = ["fix_for", "edit_text", "advice_text", "internal_advice", "TITLES", "EDITED_CAUSES"]

#: causes whose fix can be an edit of the statement that stores the value
EDITED_CAUSES = frozenset({"retained_graph", "backward_flags_graph", "eval_graph",
                           "view_pins_storage", "hidden_state_chain"})

#: human title per cause
TITLES: dict[str, str] = {
    "retained_graph": "retained autograd graph",
    "hidden_state_chain": "hidden state carried across steps without detach()",
    "backward_flags_graph": "graph kept alive by retain_graph/create_graph",
    "eval_graph": "evaluation builds autograd graphs",
    "view_pins_storage": "small views pin large storages",
    "reference_cycle": "tensors held by reference cycles",
    "growing_container": "container of tensors grows without bound",
    "grad_not_cleared": "gradients never cleared",
    "untracked_growth": "memory that no Python variable holds",
    "fragmentation": "allocator fragmentation",
    "cache_thrash": "allocator cache emptied every step",
}


def _swap(code: str, old: str, new: str) -> str:
    """Replace the last *whole* occurrence of the expression ``old`` in ``code``.

    Whole means not part of a longer name or attribute chain: in
    ``losses.append(loss)`` the value ``loss`` is the argument, not the start of
    ``losses``; the last occurrence is the argument, not the receiver.
    """
    if not old:
        return code
    pattern = re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])")
    matches = list(pattern.finditer(code))
    if not matches:
        return code
    last = matches[-1]
    return code[:last.start()] + new + code[last.end():]


def fix_for(cause: str, name: str, stmt: Statement | None, *, scalar: bool = False,
            is_tuple: bool = False, has_graph: bool = True, hook: bool = False,
            objects: bool = False) -> str:
    """One fix sentence for ``cause`` at ``stmt`` (generic when ``stmt`` is None).

    Example:
        >>> from torchmem.doctor.source import Statement
        >>> s = Statement("t.py", 3, "losses.append(loss)", "add", "main", True, "loss", "losses", "append")
        >>> fix_for("retained_graph", "losses", s, scalar=True)
        'store a number, not the graph: `losses.append(loss.item())` (or `loss.detach()` to keep a tensor)'
    """
    code = stmt.code if stmt else None
    value = stmt.value if stmt else None
    if cause == "retained_graph":
        if stmt and value:
            if scalar:
                return (f"store a number, not the graph: `{_swap(code or '', value, value + '.item()')}` "
                        f"(or `{value}.detach()` to keep a tensor)")
            return (f"keep the values, not the graph: "
                    f"`{_swap(code or '', value, value + '.detach()')}`")
        return (f"store `.item()` (a number) or `.detach()` (a tensor without graph) in "
                f"`{name}`, never the tensor that backward() uses")
    if cause == "hidden_state_chain":
        detach = (f"{name} = tuple(t.detach() for t in {name})" if is_tuple
                  else f"{name} = {name}.detach()")
        if stmt and stmt.kind in ("assign", "rebind") and stmt.target and stmt.value and name.split(".")[-1] in (stmt.target or ""):
            if stmt.target.replace(" ", "") == name.replace(" ", "") or not is_tuple:
                target = stmt.target
                if "," not in target and not is_tuple:
                    return (f"cut the graph between steps: `{target} = ({stmt.value}).detach()`, "
                            f"or `{target} = {target}.detach()` before line {stmt.line}")
        where = f" before line {stmt.line} (`{code}`)" if stmt else " at the start of each step"
        return f"cut the graph between steps: `{detach}`{where}"
    if cause == "backward_flags_graph":
        return ("drop `retain_graph=True`/`create_graph=True` unless you backpropagate twice "
                "through the same graph, and store `.item()` or `.detach()` of what you keep"
                + (f" (line {stmt.line}: `{code}`)" if stmt else ""))
    if cause == "eval_graph":
        keep = f" and keep `{value}.detach()`" if value else ""
        where = f" around the evaluation that feeds line {stmt.line} (`{code}`)" if stmt else " around evaluation"
        return f"run it under `with torch.no_grad():` (or `torch.inference_mode()`){where}{keep}"
    if cause == "view_pins_storage":
        if stmt and value:
            new = f"{value}.detach().clone()" if has_graph else f"{value}.clone()"
            return (f"copy the small piece so the big storage can be freed: "
                    f"`{_swap(code or '', value, new)}`")
        return "keep `.clone()` of the slice, not the view, so the large storage can be freed"
    if cause == "reference_cycle":
        return ("break the cycle: do not keep exceptions (store `str(err)` or "
                "`traceback.format_exc()`), do not let closures capture `self` "
                "(use `weakref.ref(self)` or a method), or `del` the objects at the end of the step; "
                "calling gc.collect() only hides it")
    if cause == "growing_container":
        if hook and not stmt:
            return ("register hooks once, outside the training loop, or keep the handle that "
                    "`register_*_hook` returns and call `handle.remove()` after use")
        if stmt and stmt.kind == "hook":
            return (f"register the hook once, outside the loop, or keep the handle and call "
                    f"`handle.remove()` after use (line {stmt.line}: `{code}`)")
        bound = f"`{name} = collections.deque(maxlen=N)`" if not (stmt and stmt.kind == "setitem") else \
            "an LRU bound (evict old keys) or clear it every epoch"
        where = f" (line {stmt.line}: `{code}`)" if stmt else ""
        if objects:  # objects that reach tensors: nothing to reduce, only to let go
            return (f"let go of each object when it is done: remove it from `{name}` then, or "
                    f"keep `weakref.ref(obj)` instead of the object, or bound it: {bound}{where}")
        return f"bound it: {bound}, or store summaries (`.item()`, means) instead of tensors{where}"
    if cause == "grad_not_cleared":
        return (f"call `{name}.zero_grad(set_to_none=True)` once per optimizer step, before "
                f"`backward()`" if name else
                "clear gradients once per update (`optimizer.zero_grad(set_to_none=True)` or "
                "`p.grad = None`) before `backward()`")
    if cause == "cache_thrash":
        where = f" (line {stmt.line}: `{code}`)" if stmt else ""
        return (f"remove `torch.cuda.empty_cache()` from the loop{where}: the caching allocator "
                "reuses freed blocks; emptying it every step forces slow cudaMalloc/cudaFree calls")
    if cause == "fragmentation":
        return ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and keep tensor shapes "
                "stable between steps (pad variable-length batches to a few bucket sizes)")
    return ""


def _where(stmt: Statement) -> str:
    """``line N: `code``` when the line is a whole statement, else ``line N``."""
    import ast

    try:
        ast.parse(stmt.code)
    except SyntaxError:
        return f"line {stmt.line}"
    return f"line {stmt.line}: `{stmt.code}`"


def edit_text(cause: str, edit: FixEdit, *, alternative: FixEdit | None = None) -> str:
    """The fix sentence for an edit, showing the whole edited statement.

    Example:
        >>> from torchmem.model.capture import FixEdit
        >>> e = FixEdit("t.py", 3, 3, "    losses.append(loss)\n", "    losses.append(loss.item())\n",
        ...             "losses.append(loss.item())", "store `loss.item()` instead of `loss`")
        >>> edit_text("retained_graph", e)
        'store a number, not the graph: `losses.append(loss.item())`'
    """
    stmt = edit.statement
    if cause == "hidden_state_chain" and edit.replacement.count("\n") == edit.original.count("\n"):
        # the statement itself is rewritten (`x[i] = v.detach()`), nothing is inserted
        return (f"write a value without graph into the kept tensor: `{stmt}` (line "
                f"{edit.first_line}), so no step's graph links to the previous one")
    if cause == "hidden_state_chain":
        return (f"cut the graph between steps: `{stmt}` before line {edit.first_line} "
                f"(so this step keeps its gradient and the previous steps' graphs are freed)")
    if cause == "view_pins_storage":
        return f"copy the small piece so the big storage can be freed: `{stmt}`"
    other = f" (or `{alternative.statement}` to keep a tensor)" if alternative is not None else ""
    if ".item()" in edit.change:
        text = f"store a number, not the graph: `{stmt}`{other}"
    else:
        text = f"keep the values, not the graph: `{stmt}`"
    if cause == "backward_flags_graph":
        text += ("; and drop `retain_graph=True`/`create_graph=True` unless you backpropagate "
                 "twice through the same graph")
    if cause == "eval_graph":
        text += "; better, run the evaluation under `with torch.no_grad():`"
    return text


def advice_text(cause: str, name: str, stmt: Statement | None, refusal: str | None,
                **kwargs: bool) -> str:
    """The fix as advice (no edit is valid), with the statement it concerns and why no
    edit is proposed."""
    if cause not in EDITED_CAUSES:
        return fix_for(cause, name, stmt, **kwargs)
    text = fix_for(cause, name, None, **kwargs)
    if stmt is not None:
        text += f" ({_where(stmt)})"
    if refusal:
        text += f"; no one-line edit: {refusal}"
    return text


def internal_advice(owner: str, owner_type: str | None, stmt: Statement | None) -> str:
    """The fix when what grows is inside an object implemented in C (``owner``, of type
    ``owner_type``): no statement stores into it, so the advice is about the object.

    Example:
        >>> internal_advice("stream", "cycle", None)[:60]
        'do not keep `stream` (a `cycle` object) across steps: it kee'
    """
    what = f"`{owner}` (a `{owner_type}` object)" if owner_type else f"`{owner}`"
    where = f" (line {stmt.line}: `{stmt.code}`)" if stmt else ""
    return (f"do not keep {what} across steps: it keeps what passes through it in memory "
            f"of its own{where}. Build it on an iterable that ends, or make a new one when "
            "the old one is used up (`itertools.cycle` keeps a copy of every item of its "
            "first pass, and over a generator or a DataLoader that pass never ends)")
