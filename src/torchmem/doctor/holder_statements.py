"""A finding's line from the statement that stored what it holds, when its own line only
made the culprit.

A culprit is named by the variable a user would write (``corpus``), and its line is the
statement that keeps adding to it. When the variable itself never grows (a list of 480
sentences stays 480 long) but what it reaches does (each sentence's tokens gain an
embedding), the statement that binds the variable (``corpus = [Sentence(...) ...]``) is
not the one to change: the one that stored the tensors deeper down is. The census of the
largest storages already says who holds each of them and which statement put it there
(``corpus[176].tokens[0]._embeddings['news-forward']``, stored by
``self._embeddings[name] = vector.to(device)``); this moves the finding to that statement,
or, when a helper only keeps what it is handed, to the call that hands the tensor over,
so that the finding and the census name the same place.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any, Sequence

from torchmem.model.capture import Finding

__all__ = ["with_holder_statements"]

#: causes whose culprit is a variable path that reaches kept tensors
_PATH_CAUSES = ("growing_container", "view_pins_storage", "retained_graph", "eval_graph")
#: the census moments read, in order of preference
_MOMENTS = ("peak", "end")
#: the share of the culprit's storages in the census that one statement must have stored
_MAJORITY = 0.5


def _binds_itself(code: str | None, name: str) -> bool:
    """Whether ``code`` (a statement's first line) is a plain binding of ``name``
    (``name = ...``, ``name: T = ...``), which makes the culprit without storing anything
    into it afterwards."""
    if not code or not re.fullmatch(r"[\w.]+", name):
        return False
    last = name.rsplit(".", 1)[-1]
    prefix = r"[\w.]*\." if "." in name else ""  # `trainer.history` is bound as `self.history`
    return re.match(rf"{prefix}{re.escape(last)}\s*(:[^=]*)?=(?!=)", code) is not None


def _under(path: str, name: str) -> bool:
    return len(path) > len(name) and path.startswith(name) and path[len(name)] in ".["


def _stored_by(moments: Sequence[Any], name: str) -> tuple[tuple[str, str, int], str, int] | None:
    """The statement (file, function, line) that stored most of the storages the census
    finds under ``name``, an example path, and the storages it stored; None without a
    majority."""
    for when in _MOMENTS:
        moment = next((m for m in moments if m.when == when), None)
        if moment is None:
            continue
        votes: Counter[tuple[str, str, int]] = Counter()
        example: dict[tuple[str, str, int], str] = {}
        under = 0
        for storage in moment.storages:
            holder = next((h for h in storage.holders if _under(h.path, name)), None)
            if holder is None:
                continue
            under += 1
            if holder.file and holder.line:
                key = (holder.file, holder.function, holder.line)
                votes[key] += 1
                example.setdefault(key, holder.path)
        if votes:
            key, count = votes.most_common(1)[0]
            if count > _MAJORITY * under:
                return key, example[key], count
    return None


def with_holder_statements(findings: Sequence[Finding], moments: Sequence[Any],
                           files: Sequence[str]) -> list[Finding]:
    """``findings`` with the line of each path finding moved to the statement that stored
    what its culprit holds, when the finding's line only binds the culprit and the culprit
    does not itself grow (see the module docstring).

    Args:
        findings: the diagnosis.
        moments: the census moments (:class:`~torchmem.model.holders.HoldersMoment`).
        files: the user's source files, to find the call that hands a value to a helper.
    """
    from torchmem.doctor.call_sites import caller_statement
    from torchmem.doctor.edits import path_fix
    from torchmem.doctor.holders_api import holder_statement

    out = []
    for f in findings:
        c = f.culprit
        if (f.cause not in _PATH_CAUSES or c is None or f.edit is not None
                or (f.data or {}).get("items_per_step", 0) != 0
                or not _binds_itself(c.code, c.name)):
            out.append(f)
            continue
        stored = _stored_by(moments, c.name)
        if stored is None:
            out.append(f)
            continue
        (file, function, line), example, count = stored
        stmt = holder_statement(example, file, function)
        if stmt is None or stmt.line != line or (stmt.file, stmt.line) == (c.file, c.line):
            out.append(f)
            continue
        site = caller_statement(stmt, [*files, stmt.file])
        shown = site[0] if site is not None else stmt
        evidence = (f"`{c.code}` (line {c.line}) only makes `{c.name}`; the tensors it keeps "
                    f"sit deeper, e.g. `{example}` ({count} of the largest storages): "
                    f"`{stmt.code}` (line {stmt.line}, in `{stmt.function}`) stored them",)
        if site is not None:
            evidence += (f"`{stmt.code}` keeps what it is handed: the values come from "
                         f"`{shown.code}` (line {shown.line}, in `{shown.function}`)",)
        # what the statement stores is the tensor the census found: the fix edits it there
        # (as for a helper that keeps what it is handed, the line shown is the call)
        fix = path_fix(f.cause, c.name, stmt, holds=("tensor",), culprit_type=None,
                       has_graph=bool((f.data or {}).get("grad_tensors")), scalar=False,
                       is_tuple=False, hook=False)
        out.append(replace(f, culprit=replace(c, file=shown.file, line=shown.line,
                                              code=shown.code, function=shown.function),
                           evidence=evidence + tuple(f.evidence), fix=fix.text,
                           fix_kind=fix.kind, edit=fix.proposal.edit,
                           alternatives=fix.proposal.edits[1:]))
    return out
