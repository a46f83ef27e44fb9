"""Gradients of a script's own leaf tensors summed over the backward calls of a loop
(``grad_not_cleared`` on what no optimizer owns).

An adversarial attack, an input optimised by hand, a perturbation ``delta`` in a PGD
loop: a leaf tensor that requires grad, differentiated once per iteration and updated by
hand between iterations (``delta.data = delta + alpha * delta.grad.sign()``). Its
``.grad`` is summed over the backward calls until something clears it, and no
``optimizer.zero_grad()`` does (it clears the optimizer's parameters only): without
``delta.grad.zero_()`` each iteration follows the sum of every earlier gradient. Memory
does not grow; the result is wrong.

:class:`LeafGrads` looks, at a backward call, at the leaf tensors among the calling
frame's locals that require grad and are not ``nn.Parameter``: when the same tensor,
seen at the previous backward call of that frame, still holds a gradient that is not
zero (nothing cleared it), the backward about to run adds to it.
:func:`leaf_grad_findings` reports a leaf for which that held at 90% of its backward
calls after its first (at least :data:`MIN_HITS`), and whose values changed in between
at half of them or more (a sample of its values: an input whose gradient is summed on
purpose, unchanged, is not reported). The culprit's line is the
statement after the backward that reads ``name.grad``. Only the first
:data:`MAX_CALLS` backward calls are looked at; tensors are held by weak references,
and what is kept is a few floats per tensor.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchmem.doctor.grad_watch import sample_values
from torchmem.model.capture import Culprit, Finding

__all__ = ["LeafGrads", "LeafGradRecord", "leaf_grad_findings", "MIN_HITS", "MAX_CALLS"]

#: backward calls that must have added to an uncleared gradient of the same leaf
MIN_HITS = 3
#: backward calls looked at in a run
MAX_CALLS = 400


@dataclass
class LeafGradRecord:
    """What was seen of one local leaf tensor (plain data).

    Attributes:
        name: the local's name; file, function, line: the backward call.
        calls: backward calls that found the same tensor as at the previous one.
        uncleared: of those, calls where its ``.grad`` was not cleared (not None, not
            zero: the previous gradient is still there).
        updated: of those, calls where its values had changed (a sample of them).
    """

    name: str
    file: str
    function: str
    line: int
    calls: int = 0
    uncleared: int = 0
    updated: int = 0


class LeafGrads:
    """Watches the local leaf tensors of the frames that call ``backward()``."""

    def __init__(self) -> None:
        self.calls = 0
        # (file, function, name) -> (weak reference, values sampled)
        self._last: dict[tuple[str, str, str], tuple[Any, list[float]]] = {}

    def on_backward(self, frame: FrameType | None, records: dict[tuple[str, str, str], LeafGradRecord],
                    read_locals: Any) -> None:
        """Look at ``frame``'s locals at a backward call; update ``records``."""
        import torch

        if frame is None or self.calls >= MAX_CALLS or frame.f_code.co_name == "<module>":
            return
        self.calls += 1
        code = frame.f_code
        for name, value in read_locals(frame).items():
            if not (isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad
                    and not isinstance(value, torch.nn.Parameter)) or value.is_sparse \
                    or value.device.type not in ("cpu", "cuda") or not value.is_floating_point():
                continue
            key = (code.co_filename, code.co_name, name)
            values = sample_values(value)
            before = self._last.get(key)
            self._last[key] = (weakref.ref(value), values)
            if before is None or before[0]() is not value:
                continue  # a new tensor: its first backward
            record = records.setdefault(key, LeafGradRecord(name, code.co_filename, code.co_name,
                                                            frame.f_lineno))
            record.calls += 1
            grad = value.grad
            record.uncleared += grad is not None and any(sample_values(grad))
            record.updated += values != before[1]


def _reads_grad_line(file: str, line: int, name: str) -> tuple[int, str] | None:
    """The first statement after ``line`` in the loop around it that reads ``name.grad``."""
    from torchmem.doctor.source import load_tree
    from torchmem.doctor.statement_rank import innermost_loop

    parsed, span = load_tree(file), innermost_loop(file, line)
    if parsed is None or span is None:
        return None
    tree, lines = parsed
    reads = sorted(n.lineno for n in ast.walk(tree)
                   if isinstance(n, ast.Attribute) and n.attr == "grad"
                   and isinstance(n.value, ast.Name) and n.value.id == name
                   and line < n.lineno <= span[1])
    if not reads:
        return None
    return reads[0], lines[reads[0] - 1].strip()


def leaf_grad_findings(records: dict[tuple[str, str, str], LeafGradRecord],
                       existing: list[Finding]) -> list[Finding]:
    """``grad_not_cleared`` findings for the leaves whose gradient every later backward
    call added to (see the module docstring); none for a name another finding has."""
    from torchmem.doctor.fixes import TITLES

    named = {f.culprit.name for f in existing if f.culprit is not None}
    out = []
    for record in records.values():
        if record.uncleared < max(MIN_HITS, 0.9 * record.calls) \
                or record.updated < 0.5 * record.calls or record.name in named:
            continue
        found = _reads_grad_line(record.file, record.line, record.name)
        line, code = found if found is not None else (record.line, "")
        name = record.name
        culprit = Culprit(name=f"{name}.grad", kind="local", file=record.file, line=line,
                          code=code or None, function=record.function, type="Tensor")
        evidence = (f"`{name}` is a leaf tensor that requires grad (not a parameter of an "
                    f"optimizer) in `{record.function}`, updated between backward calls (its values "
                    f"changed before {record.updated} of {record.calls}): at {record.uncleared} "
                    f"of them its `.grad` still held the earlier gradients, so each backward "
                    f"added to their sum; `zero_grad()` of an optimizer does not clear it",
                    "memory does not grow (gradients are summed in place): what reads "
                    f"`{name}.grad` gets the sum of every gradient so far")
        fix = (f"clear it once it is used: `{name}.grad.zero_()` (or `{name}.grad = None`)"
               + (f" after line {line} (`{code}`)" if code else "")
               + ", before the next `backward()`")
        out.append(Finding(cause="grad_not_cleared", title=TITLES["grad_not_cleared"],
                           device="cpu", bytes=0, bytes_per_step=0.0, culprit=culprit,
                           evidence=evidence, fix=fix, fix_kind="advice",
                           data={"backward_calls": record.calls, "accumulating": record.uncleared},
                           confidence="high"))
    return out
