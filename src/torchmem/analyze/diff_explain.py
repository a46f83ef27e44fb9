"""What explains the difference between two runs: rules over a diff's figures (no torch).

Each rule reads the figures of a :class:`~torchmem.analyze.diff.CaptureDiff` and, when
its pattern is in the data, says so in one sentence with the numbers that show it:

* **holders** (``new_holder``, ``vanished_holder``, ``holder_changed``): a doctor finding
  whose culprit holds memory, present on one side only, or whose bytes changed; a large
  listed storage with a name the other side does not list. Other findings (allocator
  fragmentation, cache thrash, a crash) are ``new_finding`` / ``vanished_finding``.
* **batch_size**: model state (parameters, gradients, optimizer state) unchanged while the
  other tensors (inputs, outputs, activations) scale by the same factor; listed storages of
  the same name whose first dimension scales by that factor back it up. Without such a
  storage, a new finding or new growth rules it out (the other tensors may be what a new
  holder keeps).
* **checkpointing** / **activations**: activations (or, when the census saw none, the
  peak) fell while the model state and the inputs stayed the same. With slower steps
  (recompute) or a new line calling ``checkpoint``, it is reported as checkpointing;
  otherwise as activations that shrank, naming what does that (checkpointing, autocast,
  in-place operations). The reverse is reported the same way.
* **model_size**, **dtype**, **optimizer_state**: parameter bytes changed; the same
  storages changed dtype; optimizer state changed relative to the parameters.
* **growth**: a device whose growth per step changed by 4 KiB/step or more.
* **line**: the source lines whose bytes changed most (when the inputs have per-line data).
* **unexplained**: the peak moved and no rule above accounts for it (said with what was
  checked, never left silent).

Known limitations:
    * A capture's bytes by role come from a census at a step boundary, after
      ``optimizer.step()``: activations are usually freed by then, so batch size and
      checkpointing are read from the inputs, the listed storages and the peak.
    * Module figures derived from listed storages cover only those storages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchmem.units import format_bytes, format_delta

if TYPE_CHECKING:
    from torchmem.analyze.diff import CaptureDiff, Explanation, Side

__all__ = ["explain"]

MiB = 1024 * 1024
#: model state: what does not depend on the batch
_STATE = ("parameter", "buffer", "gradient", "optimizer_state")
#: causes whose culprit holds the memory (the others: the allocator's state, a crash...)
_RETAINING = ("retained_graph", "hidden_state_chain", "backward_flags_graph", "eval_graph",
              "view_pins_storage", "reference_cycle", "growing_container", "grad_not_cleared")
#: explanations that account for a moved peak
_EXPLAINS_PEAK = ("new_holder", "vanished_holder", "holder_changed", "new_finding",
                  "vanished_finding", "line")
#: growth changes smaller than this (bytes per step) are not explained (the table shows them)
_GROWTH_FLOOR = 4096


def _same(x: float | None, y: float | None, tol: float = 0.02) -> bool:
    x, y = x or 0, y or 0
    return abs(x - y) <= tol * max(abs(x), abs(y), 1)


def _times(r: float) -> str:
    return f"×{r:.2f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b and a > 0 and b > 0 else None


def _role(side: "Side", role: str) -> int:
    return int(side.roles.get(role, 0) or 0)


def _state(side: "Side") -> int:
    return sum(_role(side, r) for r in _STATE)


def _peak_change(diff: "CaptureDiff") -> tuple[str, float, float, float] | None:
    """(device, a, b, change) of the device whose peak moved most."""
    rows = [r for r in diff.peak if r.a is not None and r.b is not None]
    if not rows:
        return None
    row = max(rows, key=lambda r: abs(r.change))
    return row.key, float(row.a or 0), float(row.b or 0), row.change


def _significant(change: float, base: float) -> bool:
    return abs(change) >= max(256 * 1024, 0.02 * abs(base))


def _holders(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> None:
    for c in diff.findings:
        holds = c.cause in _RETAINING and c.holder
        who = f"`{c.holder}`" if c.holder else c.title
        where = f" ({c.where})" if c.where else ""
        if c.status == "new":
            per = f", {format_delta(c.per_step_b or 0)}/step" if c.per_step_b else ""
            if holds:
                text = (f"new holder in {diff.b.label}: {who}{where} keeps a {c.title}: "
                        f"{format_bytes(c.bytes_b or 0)} at the end{per}")
            else:
                text = (f"new finding in {diff.b.label}: {c.title}{_by(c)}: "
                        f"{format_bytes(c.bytes_b or 0)}{per}")
            out.append(E("new_holder" if holds else "new_finding", text, float(c.bytes_b or 0)))
        elif c.status == "gone":
            per = f", {format_delta(c.per_step_a or 0)}/step" if c.per_step_a else ""
            if holds:
                text = (f"{who}{where} no longer keeps a {c.title} in {diff.b.label} "
                        f"({format_bytes(c.bytes_a or 0)}{per} in {diff.a.label})")
            else:
                text = (f"gone in {diff.b.label}: {c.title}{_by(c)}: "
                        f"{format_bytes(c.bytes_a or 0)}{per} in {diff.a.label}")
            out.append(E("vanished_holder" if holds else "vanished_finding", text,
                         float(c.bytes_a or 0)))
        elif not _same(c.bytes_a, c.bytes_b, 0.1) or not _same(c.per_step_a, c.per_step_b, 0.1):
            out.append(E("holder_changed", f"{who}{where} ({c.title}) holds "
                         f"{format_bytes(c.bytes_a or 0)} -> {format_bytes(c.bytes_b or 0)} "
                         f"({format_delta(c.per_step_a or 0)}/step -> "
                         f"{format_delta(c.per_step_b or 0)}/step)",
                         abs((c.bytes_b or 0) - (c.bytes_a or 0))))
    from torchmem.analyze.diff_inputs import listed_elsewhere

    for side, other, verb in ((diff.b, diff.a, "new"), (diff.a, diff.b, "gone")):
        for s in side.storages:
            if (not s.name or s.role in _STATE or s.nbytes < MiB
                    or listed_elsewhere(s, other.storages) is not False):
                continue
            shape = "(" + ", ".join(map(str, s.shape)) + ")"
            text = (f"new storage in {diff.b.label}: `{s.name}` ({s.role}, "
                    f"{format_bytes(s.nbytes)}, {shape} {s.dtype})" if verb == "new" else
                    f"storage `{s.name}` of {diff.a.label} ({s.role}, "
                    f"{format_bytes(s.nbytes)}) is gone in {diff.b.label}")
            out.append(E("new_holder" if verb == "new" else "vanished_holder", text,
                         float(s.nbytes)))


def _by(c: Any) -> str:
    """`` (`holder`, file:line)`` of a finding that is not a holder of memory."""
    parts = [f"`{c.holder}`" if c.holder else "", c.where or ""]
    shown = ", ".join(p for p in parts if p)
    return f" ({shown})" if shown else ""


def _shape_key(s: Any) -> Any:
    """Listed storages pair up by name; unnamed ones by role, dtype and all but the first
    dimension (when exactly one of each side has that key)."""
    return s.name if s.name else (s.role, s.dtype, len(s.shape), tuple(s.shape[1:]))


def _shape_ratios(diff: "CaptureDiff") -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """Listed storages of both sides whose shapes differ only in the first dimension."""
    def unique(storages: Any) -> dict[Any, Any]:
        seen: dict[Any, list[Any]] = {}
        for s in storages:
            if s.shape:
                seen.setdefault(_shape_key(s), []).append(s)
        return {k: v[0] for k, v in seen.items() if len(v) == 1}
    a, b = unique(diff.a.storages), unique(diff.b.storages)
    out = []
    for key, new in b.items():
        old = a.get(key)
        if old is None or len(old.shape) != len(new.shape) or old.shape[0] <= 0:
            continue
        if old.shape[0] != new.shape[0] and tuple(old.shape[1:]) == tuple(new.shape[1:]):
            name = f"`{new.name}`" if new.name else f"an unnamed {new.role} {new.dtype} tensor"
            out.append((name, tuple(old.shape), tuple(new.shape)))
    return out


def _growth_rose(row: Any) -> bool:
    return (row.b or 0.0) - (row.a or 0.0) >= _GROWTH_FLOOR


def _batch(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> bool:
    a, b = diff.a, diff.b
    if not a.roles or not b.roles or not _same(_state(a), _state(b)):
        return False
    shapes = _shape_ratios(diff)
    found = (_ratio(_role(a, r), _role(b, r)) for r in ("other", "activation"))
    ratios = [r for r in found if r is not None]
    from_shapes = [s[2][0] / s[1][0] for s in shapes]
    scale = from_shapes[0] if from_shapes else (ratios[0] if ratios else None)
    if scale is None or 0.83 < scale < 1.2:
        return False
    if ratios and not all(abs(r / scale - 1) <= 0.15 for r in ratios):
        return False
    if not ratios and not shapes:
        return False
    if not shapes and (any(c.status == "new" for c in diff.findings)
                       or any(_growth_rose(row) for row in diff.growth)):
        return False  # the other tensors may be what a new holder keeps: not a batch change
    moved = [f"{r} bytes {format_bytes(_role(a, r))} -> {format_bytes(_role(b, r))} "
             f"({_times(_role(b, r) / _role(a, r))})"
             for r in ("other", "activation") if _ratio(_role(a, r), _role(b, r))]
    parts = [", ".join(moved)] if moved else []
    if shapes:
        parts.append("; ".join(f"{n} {tuple(x)} -> {tuple(y)}" for n, x, y in shapes[:3]))
    peak = _peak_change(diff)
    tail = (f"; peak on {peak[0]} {format_delta(peak[3])}" if peak and peak[3] else "")
    word = "larger" if scale > 1 else "smaller"
    out.append(E("batch_size", f"a {word} batch, about {_times(scale)}: "
                 f"{'; '.join(parts)}, while model state (parameters, gradients, optimizer "
                 f"state) stayed {format_bytes(_state(b))}{tail}",
                 float(abs(peak[3]) if peak else 0)))
    return True


def _checkpointing(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> bool:
    """Activations (or the peak) moved while model state and inputs did not."""
    a, b = diff.a, diff.b
    if not a.roles or not b.roles or not (_same(_state(a), _state(b))
                                          and _same(_role(a, "other"), _role(b, "other"), 0.1)):
        return False
    act_a, act_b = _role(a, "activation"), _role(b, "activation")
    if act_a or act_b:
        what, x, y = "activation bytes", float(act_a), float(act_b)
    else:
        peak = _peak_change(diff)
        if peak is None:
            return False
        what, x, y = f"the peak on {peak[0]}", peak[1], peak[2]
    if not _significant(y - x, max(x, y)):
        return False
    fell = y < x
    time_ratio = _ratio(a.step_time, b.step_time)
    code_a = any("checkpoint" in rec[3] for rec in a.lines)
    code_b = any("checkpoint" in rec[3] for rec in b.lines)
    timing = ""
    if time_ratio is not None:
        timing = (f"; time per step ×{time_ratio:.2f} ({a.step_time * 1e3:.1f} ms -> "  # type: ignore[operator]
                  f"{b.step_time * 1e3:.1f} ms)")  # type: ignore[operator]
    state = (f"{what} {format_bytes(x)} -> {format_bytes(y)} ({format_delta(y - x)}, "
             f"{(y - x) / x:+.1%}) while model state ({format_bytes(_state(b))}) and inputs "
             f"({format_bytes(_role(b, 'other'))}) stayed the same{timing}")
    recompute = time_ratio is not None and (time_ratio >= 1.1 if fell else time_ratio <= 1 / 1.1)
    code = (code_b and not code_a) if fell else (code_a and not code_b)
    if recompute or code:
        why = "a line calling checkpoint appears" if fell else "the checkpoint call is gone"
        why = why if code else ("steps are slower: activations are recomputed in backward"
                                if fell else "steps are faster: nothing is recomputed")
        text = (f"activation checkpointing {'added' if fell else 'removed'} in {b.label}: "
                f"{state}; {why}")
        out.append(E("checkpointing", text, abs(y - x)))
    else:
        verb = "shrank" if fell else "grew"
        text = (f"the activations at the peak {verb}: {state}; that is what activation "
                f"checkpointing, autocast or in-place operations change "
                f"({'a slower' if fell else 'a faster'} step would point to checkpointing "
                f"{'added' if fell else 'removed'}; timings compare only on a quiet machine)")
        out.append(E("activations", text, abs(y - x)))
    return True


def _model(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> bool:
    a, b = diff.a, diff.b
    found = False
    dtypes: dict[tuple[str, str], list[str]] = {}
    old = {s.name: s for s in a.storages if s.name}
    for s in b.storages:
        prev = old.get(s.name)
        if prev is not None and prev.dtype != s.dtype:
            dtypes.setdefault((prev.dtype, s.dtype), []).append(s.name)
    for (x, y), names in dtypes.items():
        out.append(E("dtype", f"{len(names)} listed storage{'s' if len(names) > 1 else ''} "
                     f"changed dtype {x} -> {y} (e.g. `{names[0]}`)", 0.0))
        found = True
    pa, pb = _role(a, "parameter"), _role(b, "parameter")
    if a.roles and b.roles and not _same(pa, pb):
        new = [r.key for r in diff.modules if r.a is None and r.b]
        gone = [r.key for r in diff.modules if r.b is None and r.a]
        extra = ""
        for names, label in ((new, b.label), (gone, a.label)):
            if names:
                more = "…" if len(names) > 4 else ""
                extra += f"; modules only in {label}: " + ", ".join(names[:4]) + more
        ratio = _ratio(pa, pb)
        scale = f" ({_times(ratio)})" if ratio else ""
        out.append(E("model_size", f"the model changed: parameter bytes {format_bytes(pa)} -> "
                     f"{format_bytes(pb)}{scale}, gradients {format_bytes(_role(a, 'gradient'))} "
                     f"-> {format_bytes(_role(b, 'gradient'))}{extra}", float(abs(pb - pa))))
        found = True
    oa, ob = _role(a, "optimizer_state"), _role(b, "optimizer_state")
    if a.roles and b.roles and _same(pa, pb) and pa and not _same(oa, ob):
        out.append(E("optimizer_state", f"optimizer state {format_bytes(oa)} -> "
                     f"{format_bytes(ob)} with the same parameters: {oa / pa:.2f}× -> "
                     f"{ob / pa:.2f}× the parameter bytes (an optimizer that keeps more or "
                     "less state per parameter, e.g. SGD vs Adam)", float(abs(ob - oa))))
        found = True
    return found


def _growth(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> None:
    named = any(c.status == "new" for c in diff.findings)
    unit = diff.a.growth_unit
    for row in diff.growth:
        a, b = row.a or 0.0, row.b or 0.0
        if abs(b - a) < _GROWTH_FLOOR:
            continue
        if b > a and a == 0:
            hint = ("" if named else "; no finding names a holder" + (
                f": `torchmem doctor` on {diff.b.script or 'the script'} looks for one"
                if "doctor" not in diff.b.tool else ""))
            out.append(E("growth", f"memory grows on {row.key} in {diff.b.label} by "
                         f"{format_bytes(b)}/{unit} ({diff.a.label}: "
                         f"{diff.a.verdict.get(row.key, 'no verdict')}){hint}", b))
        elif a > 0 and b == 0:
            out.append(E("growth", f"memory no longer grows on {row.key} in {diff.b.label} "
                         f"({diff.b.verdict.get(row.key, 'no verdict')}; {diff.a.label} grew "
                         f"{format_bytes(a)}/{unit})", a))
        elif not _same(a, b, 0.1):
            out.append(E("growth", f"growth on {row.key} {format_bytes(a)}/{unit} -> "
                         f"{format_bytes(b)}/{unit}", abs(b - a)))


def _lines(diff: "CaptureDiff", out: list["Explanation"], E: Any) -> None:
    peak = _peak_change(diff)
    floor = max(MiB, 0.1 * abs(peak[3])) if peak else MiB
    for row in diff.lines[:3]:
        if abs(row.change) < floor:
            continue
        code = f" `{row.code.strip()}`" if row.code.strip() else ""
        if diff.a.line_measure == "peak" and code:  # a snapshot's function name, not code
            code = f" ({row.code.strip()})"
        alive = f"alive {format_bytes(row.alive_a or 0)} -> {format_bytes(row.alive_b or 0)}"
        made = (f"allocated {format_bytes(row.allocated_a or 0)} -> "
                f"{format_bytes(row.allocated_b or 0)}, " if diff.a.line_measure == "step"
                else "")
        alive += " at the peak" if diff.a.line_measure == "peak" else ""
        only_b = row.alive_a is None and row.allocated_a is None
        only_a = row.alive_b is None and row.allocated_b is None
        status = (f" (only in {diff.b.label})" if only_b
                  else f" (only in {diff.a.label})" if only_a else "")
        out.append(E("line", f"{row.where}{code}{status}: {made}{alive}", abs(row.change)))


def explain(diff: "CaptureDiff") -> list["Explanation"]:
    """The explanations of ``diff``, largest effect first (see the module docstring)."""
    from torchmem.analyze.diff import Explanation as E

    out: list[Explanation] = []
    _holders(diff, out, E)
    model = _model(diff, out, E)
    batch = _batch(diff, out, E)
    ckpt = False if batch or model else _checkpointing(diff, out, E)
    _growth(diff, out, E)
    _lines(diff, out, E)
    out.sort(key=lambda e: -e.bytes)
    peak = _peak_change(diff)
    if peak is not None and _significant(peak[3], max(peak[1], peak[2])) and not (
            batch or model or ckpt or any(e.kind in _EXPLAINS_PEAK for e in out)):
        device = peak[0]
        heap = (f"; on {device} the peak is the C heap, which also counts memory outside "
                "tensors (libraries, Python objects)") if device == "cpu" else ""
        roles = ("bytes by role, listed storages and findings" if diff.a.roles or diff.b.roles
                 else "findings (neither input has a census of its tensors)")
        out.append(E("unexplained", f"the peak on {device} moved by {format_delta(peak[3])} "
                     f"({format_bytes(peak[1])} -> {format_bytes(peak[2])}) and none of the "
                     f"{roles} explain it{heap}", abs(peak[3])))
    return out
