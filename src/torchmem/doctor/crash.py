"""Explain the autograd errors that a carried hidden state or an in-place op cause.

Two of torch's errors are memory-graph symptoms rather than bugs of their own:

* ``Trying to backward through the graph a second time`` -- this step's graph reaches
  a previous step's graph, whose saved tensors the previous ``backward()`` freed. The
  classic cause is a recurrent state carried across steps without ``detach()``
  (``h = model(x, h)`` every step, then ``loss.backward()``).
* ``one of the variables needed for gradient computation has been modified by an
  inplace operation`` -- a tensor saved for backward changed (its version counter moved
  on) before backward used it: an in-place op in the step (``x += 1``, ``relu_``,
  ``inplace=True``), or ``optimizer.step()`` updating parameters that an older step's
  graph, kept alive by a carried state and ``retain_graph=True``, still needs.

:func:`explain_crash` reads the exception, the innermost user frame of its traceback and
the script's source, and returns a :class:`~torchmem.model.capture.Finding` that names
the carried variable and the line that rebinds it (or the in-place candidates), with the
fix. It reads variables and their graphs without unpacking any saved tensor.

Known limitations:
    * The carried state is looked for among the variables of the user frames on the
      failing stack (names and ``self`` attributes, tensors or tuples/lists of tensors);
      a state kept deeper inside other objects is not named.
    * torch's message names the modified tensor's shape and the node that produced it,
      not the in-place op: the in-place statements of the failing function are listed as
      candidates.
"""

from __future__ import annotations

import linecache
import re
import types
from typing import Any, Callable, Iterable

import torch

from torchmem.collect.graph import raw_saved_names, iter_nodes, read_saved
from torchmem.doctor.culprit import frame_chain, read_locals
from torchmem.doctor.source import Statement, find_statements
from torchmem.model.capture import Culprit, Finding

__all__ = ["explain_crash", "SECOND_TIME", "INPLACE"]

#: substrings of torch's two errors
SECOND_TIME = "backward through the graph a second time"
INPLACE = "modified by an inplace operation"
_INPLACE_DETAIL = re.compile(
    r"inplace operation: \[(?P<tensor>[^\]]*\[[^\]]*\])\](?:, which is output (?P<out>\d+) of "
    r"(?P<node>\w+),)? is at version (?P<now>\d+); expected version (?P<want>\d+)")
_INPLACE_CALL = re.compile(r"\.(?!_)\w*[a-z0-9]_\(|inplace\s*=\s*True")
_AUGASSIGN = re.compile(r"^([A-Za-z_][\w.]*)\s*(?:\+|-|\*|/|\*\*|@)=[^=]")
_MAX_NODES = 20_000


def _candidates(frame: types.FrameType | None,
                is_user: Callable[[str], bool]) -> list[tuple[str, Any, types.FrameType]]:
    """(name, value, frame) of the tensors with graphs the failing stack's variables hold."""
    out: list[tuple[str, Any, types.FrameType]] = []
    seen: set[str] = set()
    for f in frame_chain(frame, is_user):
        space = dict(f.f_globals) if f.f_code.co_name == "<module>" else read_locals(f)
        items = list(space.items())
        owner = space.get("self")
        if owner is not None and not isinstance(owner, torch.nn.Module):
            try:
                items += [(f"self.{k}", v) for k, v in vars(owner).items()]
            except TypeError:
                pass
        for name, value in items:
            if name in seen or name.startswith("__"):
                continue
            if _graph_roots(value):
                seen.add(name)
                out.append((name, value, f))
        space.clear()
    return out


def _graph_roots(value: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value.grad_fn] if value.grad_fn is not None else []
    if isinstance(value, (tuple, list)) and 0 < len(value) <= 8:
        return [t.grad_fn for t in value if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    return []


def _reaches_freed(roots: Iterable[Any]) -> bool:
    """True when the graph under ``roots`` reaches a node whose saved tensors were freed."""
    return any(read_saved(node).freed for node in iter_nodes(roots, limit=_MAX_NODES))


def _carry(name: str, frame: types.FrameType) -> Statement | None:
    """The in-loop statement that rebinds ``name`` from its own old value (``h = f(x, h)``)."""
    found = [s for s in find_statements(name, [frame.f_code.co_filename])
             if s.kind == "assign" and s.in_loop and s.function == frame.f_code.co_name]
    return min(found, key=lambda s: s.line) if found else None


def _is_parameter(t: torch.Tensor) -> bool:
    base = t._base if t._base is not None else t
    return bool(base.is_leaf and base.requires_grad)


def _reaches_stale_parameter(roots: Iterable[Any]) -> bool:
    """True when the graph under ``roots`` saved a parameter that was updated in place since.

    Within one step nothing updates parameters between forward and backward; a saved
    parameter whose version moved on therefore belongs to an earlier step's graph. Only
    slots without a ``saved_tensors_hooks`` unpack hook are read (reading checks versions).
    """
    for node in iter_nodes(roots, limit=_MAX_NODES):
        for attr in raw_saved_names(node):
            name = "_saved_" + attr[len("_raw_saved_"):]
            try:
                raw = getattr(node, attr)
                slots = raw if isinstance(raw, (list, tuple)) else (raw,)
                if any(r is None or getattr(r, "unpack_hook", True) is not None for r in slots):
                    continue
                params = [r.data for r in slots
                          if isinstance(r.data, torch.Tensor) and _is_parameter(r.data)]
                if not params:
                    continue
                getattr(node, name if attr != "_raw_saved_tensors" else "saved_tensors")
            except RuntimeError as err:
                if INPLACE in str(err):
                    return True
            except Exception:  # noqa: BLE001 - an odd node: not evidence either way
                continue
    return False


def _carried_state(frame: types.FrameType | None, is_user: Callable[[str], bool],
                   reaches: Callable[[Iterable[Any]], bool]) -> tuple[str, Any, Statement] | None:
    """The variable carried across steps: rebound from itself in a loop, and whose graph
    ``reaches`` an earlier step's (freed nodes, or parameters updated since)."""
    for name, value, f in _candidates(frame, is_user):
        stmt = _carry(name, f)
        if stmt is not None and reaches(_graph_roots(value)):
            return name, value, stmt
    return None


def _inplace_lines(frame: types.FrameType | None) -> list[tuple[int, str]]:
    """In-place statements of the failing function (candidates for the modified tensor)."""
    if frame is None:
        return []
    code = frame.f_code
    lines = linecache.getlines(code.co_filename)
    module = code.co_name == "<module>"
    start = 1 if module else code.co_firstlineno
    end = frame.f_lineno if module else max(
        [ln for _, _, ln in code.co_lines() if ln is not None] + [frame.f_lineno])
    space = frame.f_globals if module else read_locals(frame)
    out = []
    for n in range(start, min(end, len(lines)) + 1):
        text = lines[n - 1].split("#", 1)[0].strip()
        aug = _AUGASSIGN.match(text)
        tensor_aug = aug is not None and isinstance(space.get(aug.group(1)), torch.Tensor)
        if text and (tensor_aug or _INPLACE_CALL.search(text)):
            out.append((n, lines[n - 1].strip()))
    if not module:
        space.clear()
    return out[:6]


def _site(frame: types.FrameType | None) -> tuple[str | None, int | None, str | None]:
    if frame is None:
        return None, None, None
    file, line = frame.f_code.co_filename, frame.f_lineno
    return file, line, linecache.getline(file, line).strip() or None


def _detach_fix(name: str, value: Any, stmt: Statement) -> str:
    if isinstance(value, (tuple, list)):
        detach = f"{name} = tuple(t.detach() for t in {name})"
    else:
        detach = f"{name} = {name}.detach()"
    return (f"detach the carried state at the start of each step: `{detach}` before line "
            f"{stmt.line} (`{stmt.code}`); gradients then flow within the step only "
            "(truncated backpropagation through time), and each step's graph is freed by its "
            "own backward()")


def explain_crash(exc: BaseException, frame: types.FrameType | None,
                  is_user: Callable[[str], bool]) -> Finding | None:
    """A finding for torch's backward-twice or in-place version error, or None.

    Args:
        exc: the exception that ended the script.
        frame: the innermost user frame of its traceback (alive while this runs).
        is_user: decides whether a filename is user code.

    Returns:
        A :class:`Finding` naming the culprit line and the fix, or None for other errors.
    """
    message = str(exc)
    if not isinstance(exc, RuntimeError) or (SECOND_TIME not in message and INPLACE not in message):
        return None
    file, line, code = _site(frame)
    failed_at = f"line {line} (`{code}`)" if line else "the backward call"
    if SECOND_TIME in message:
        carried = _carried_state(frame, is_user, _reaches_freed)
        if carried is not None:
            name, value, stmt = carried
            evidence = (
                f"the script stopped at {failed_at}: torch's \"Trying to backward through the "
                "graph a second time\"",
                f"`{name}` is rebound from its own previous value every step (line "
                f"{stmt.line}: `{stmt.code}`) and still carries its autograd graph: this "
                "step's graph reaches the previous step's, whose saved tensors the previous "
                "backward() freed",
                "adding retain_graph=True would hide the error but keep every step's graph "
                "alive: memory would then grow without bound",
            )
            return Finding(
                cause="hidden_state_chain",
                title="hidden state carried across steps without detach()",
                culprit=Culprit(name=name, kind="local", file=stmt.file, line=stmt.line,
                                code=stmt.code, function=stmt.function,
                                type=type(value).__name__),
                evidence=evidence, fix=_detach_fix(name, value, stmt),
                data={"error": "backward_twice", "failed_line": line}, confidence="high")
        return Finding(
            cause="backward_error", title="backward through a graph that was already freed",
            culprit=Culprit(name="backward()", kind="unknown", file=file, line=line, code=code),
            evidence=(f"the script stopped at {failed_at}: torch's \"Trying to backward "
                      "through the graph a second time\"",
                      "the graph reached by this backward() was already used (and its saved "
                      "tensors freed) by an earlier backward()"),
            fix=("detach what one step carries into the next (`h = h.detach()`), or compute "
                 "the loss again before the second backward(); pass retain_graph=True to the "
                 "first backward() only when you really backpropagate twice through one graph"),
            data={"error": "backward_twice", "failed_line": line}, confidence="medium")
    detail = _INPLACE_DETAIL.search(message)
    tensor = detail.group("tensor") if detail else None
    node = detail.group("node") if detail else None
    what = f"a tensor {tensor}" if tensor else "a tensor saved for backward"
    if node and detail:
        op = re.sub(r"Backward\d*$", "", node)
        what += f" (output {detail.group('out')} of `{op}`: the result of that op)"
    elif tensor:
        what += " (a leaf: a parameter or an input, not the result of an op)"
    versions = (f"; it is at version {detail.group('now')}, backward expected "
                f"{detail.group('want')}") if detail else ""
    carried = _carried_state(frame, is_user, _reaches_stale_parameter)
    if carried is not None:
        name, value, stmt = carried
        return Finding(
            cause="hidden_state_chain",
            title="hidden state carried across steps without detach()",
            culprit=Culprit(name=name, kind="local", file=stmt.file, line=stmt.line,
                            code=stmt.code, function=stmt.function, type=type(value).__name__),
            evidence=(f"the script stopped at {failed_at}: torch's \"modified by an inplace "
                      f"operation\" for {what}{versions}",
                      f"`{name}` is rebound from its own previous value every step (line "
                      f"{stmt.line}: `{stmt.code}`) and still carries its autograd graph: "
                      "backward() reaches an earlier step's graph, whose saved parameters "
                      "optimizer.step() has since updated in place"),
            fix=_detach_fix(name, value, stmt) + "; then retain_graph=True is not needed",
            data={"error": "inplace_version", "failed_line": line, "tensor": tensor},
            confidence="high")
    ops = _inplace_lines(frame)
    candidates = "; ".join(f"line {n}: `{t}`" for n, t in ops)
    notes = [f"the script stopped at {failed_at}: torch's \"modified by an inplace "
                f"operation\" for {what}{versions}",
                "a tensor saved for backward was changed in place between the forward pass "
                "and backward()"]
    if candidates:
        notes.append(f"in-place operations in `{frame.f_code.co_name if frame else '?'}`: "
                        f"{candidates}")
    first = ops[0] if ops else None
    target = _AUGASSIGN.match(first[1]) if first else None
    receiver = re.match(r"([A-Za-z_][\w.]*)\.\w+_\(", first[1]) if first else None
    found = target or receiver
    shown = found.group(1) if found is not None else "in-place operation"
    return Finding(
        cause="inplace_modified", title="a tensor saved for backward was modified in place",
        culprit=Culprit(name=shown, kind="unknown",
                        file=file, line=first[0] if first else line,
                        code=first[1] if first else code),
        evidence=tuple(notes),
        fix=("use the out-of-place op (`x = x + y` instead of `x += y`, `torch.relu(x)` "
             "instead of `relu_`, `inplace=False`), or `.clone()` the tensor before modifying "
             "it" + (f" (line {first[0]}: `{first[1]}`)" if first else "")),
        data={"error": "inplace_version", "failed_line": line, "tensor": tensor, "node": node},
        confidence="medium" if first else "low")
