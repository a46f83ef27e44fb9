"""Graphs kept by one statement that runs a whole evaluation pass.

``outputs = [model(x) for x in batches]`` outside ``torch.no_grad()`` keeps every
batch's output, with its graph and saved activations, in a list that no name holds until
the statement ends: the list under construction sits on the comprehension's stack, where
no snapshot of names reaches it. The pass's memory rises at every forward and falls back
when the statement is done (or when its target is dropped).

:func:`statement_findings` reports it as ``eval_graph`` when

* the grad-enabled passes rise within every pass
  (:func:`~torchmem.analyze.growth.detect_pass_growth`, two passes or more);
* in at least two passes, every snapshot taken at the pass's forwards was taken inside
  the same statement of the script (``Snapshot.site``);
* that statement assigns a value that holds a comprehension (a list, set or dict
  display built by a loop, or a generator given to a call);
* no finding already names what the passes keep.

The culprit is the statement's target, at its line; the fix is advice: run the
statement under ``torch.no_grad()``. Passes run under ``no_grad`` are left alone: there a
comprehension that collects the outputs keeps no graph (predictions collected for a
metric). Never imports torch.
"""

from __future__ import annotations

import ast
from typing import Any

from torchmem.analyze.growth import detect_pass_growth
from torchmem.doctor.pathstats import Snapshot
from torchmem.doctor.source import load_tree
from torchmem.model.capture import Culprit, Finding

__all__ = ["statement_findings", "MIN_PASSES"]

#: passes whose forwards must all run inside the one statement
MIN_PASSES = 2
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _statement(file: str, line: int) -> ast.stmt | None:
    """The assignment at ``line`` of ``file`` whose value holds a comprehension."""
    parsed = load_tree(file)
    if parsed is None:
        return None
    for node in ast.walk(parsed[0]):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno <= line \
                <= (node.end_lineno or node.lineno) and node.value is not None \
                and any(isinstance(n, _COMPREHENSIONS) for n in ast.walk(node.value)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1:
                return node
    return None


def statement_findings(passes: dict[int, list[Snapshot]], readings: dict[int, list[tuple[int, int]]],
                       grad: dict[int, bool], ends: set[int], opened_by: str) -> list[Any]:
    """``eval_graph`` findings for a statement that runs whole grad-enabled passes (see
    the module docstring)."""
    numbers = [n for n in passes if grad.get(n) and readings.get(n)]
    if len(numbers) < MIN_PASSES:
        return []
    verdict = detect_pass_growth([readings[n] for n in numbers])
    if verdict.verdict != "growing" or verdict.bytes_per_step <= 0:
        return []
    sites = set()
    judged = 0
    for n in numbers:
        seen = {s.site for s in passes[n] if s.step not in ends}
        if len(seen) != 1 or None in seen:
            return []
        sites |= seen
        judged += 1
    if len(sites) != 1 or judged < MIN_PASSES:
        return []
    file, line = next(iter(sites))  # type: ignore[misc]
    stmt = _statement(file, line)
    if stmt is None:
        return []
    parsed = load_tree(file)
    code = parsed[1][stmt.lineno - 1].strip() if parsed else ""
    target = ast.unparse(stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target)
    evidence = (
        f"every forward of {judged} evaluation passes ({opened_by}, grad enabled) ran inside "
        f"`{code}` (line {stmt.lineno}): the collection it builds keeps each output with its "
        "autograd graph and saved activations until the statement ends",
        f"the C heap {verdict.reason}",
        "no variable holds the collection while it is built (it sits on the "
        "comprehension's stack), so only the statement can be named")
    fix = (f"run `{code}` (line {stmt.lineno}) under `with torch.no_grad():` (or "
           "`torch.inference_mode()`): the outputs are only evaluated, never backpropagated")
    return [Finding(
        cause="eval_graph", title="evaluation builds autograd graphs", device="cpu",
        bytes=int(verdict.total_growth), bytes_per_step=verdict.bytes_per_step,
        culprit=Culprit(name=target, kind="local", file=file, line=stmt.lineno, code=code),
        evidence=evidence, fix=fix, fix_kind="advice",
        data={"phase": "eval-grad", "passes": judged, "pass_rise": verdict.total_growth,
              "step_unit": "top-level module call in evaluation"},
        confidence="high" if judged >= 3 else "medium")]
