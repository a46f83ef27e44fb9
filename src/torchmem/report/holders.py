"""Render the doctor's "who holds the largest storages" section (terminal and HTML).

For each moment of :attr:`Capture.holders <torchmem.model.capture.Capture.holders>` (an
out-of-memory error, another exception, the peak, the end): a title saying when and
what memory read then, and per storage one line (bytes, dtype, shape, role, owner name)
followed by the paths that hold it, each with the ``file:line`` of the statement that
put it there, and where it was made (``torchmem doctor --lines``). The strings are those
of an escaped capture (:func:`torchmem.report.sanitize.printable_capture`). Never imports
torch.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.text import Text

from torchmem.model.capture import Capture
from torchmem.model.holders import HOLDER_MOMENTS, HeldStorage, HolderPath, HoldersMoment
from torchmem.units import format_bytes

__all__ = ["print_holders", "moment_title", "storage_text", "holder_text", "made_text",
           "holders_context", "UNKNOWN_SITE"]

#: What the report says about allocation sites without ``--lines``.
UNKNOWN_SITE = ("where each was made: unknown (the allocating lines are recorded by "
                "`torchmem doctor --lines`)")


def _reading(used: dict[str, int]) -> str:
    return ", ".join(f"{d} {format_bytes(v)}" for d, v in sorted(used.items()))


def moment_title(moment: HoldersMoment, capture: Capture | None = None) -> str:
    """``who holds the largest storages at the peak (step 32: cpu 140.2 MiB; ...)``."""
    step = f"step {moment.step}"
    if moment.when == "peak":
        at = f"at the peak ({step}"
        if moment.used:
            at += f": {_reading(moment.used)}"
            best = _highest_step(capture, moment) if capture is not None else None
            if best is not None:
                at += f"; the highest step reading was {best}"
        at += ")"
    elif moment.when == "eval_peak":
        at = (f"at the peak of the evaluation passes ({_reading(moment.used)}, "
              f"after step {moment.step})")
    elif moment.when == "oom":
        at = f"at the out-of-memory error (after {step})"
    elif moment.when == "exception":
        at = f"when the script raised (after {step})"
    else:
        at = f"at the end of the run (after {step})"
    return f"who holds the largest storages {at}"


def _highest_step(capture: Capture, moment: HoldersMoment) -> str | None:
    """The highest step reading of the run where it is above the moment's, in words."""
    out = []
    for device, value in sorted(moment.used.items()):
        best = max(((s.used.get(device, -1), s.step) for s in capture.steps), default=None)
        if best is not None and best[0] > value:
            out.append(f"{device} {format_bytes(best[0])} at step {best[1]}")
    return ", ".join(out) or None


def storage_text(s: HeldStorage) -> str:
    """``2.0 MiB float32 (1000, 512) parameter 4.weight``."""
    parts = [format_bytes(s.nbytes)]
    if s.dtype:
        parts.append(s.dtype)
    parts.append("(" + ", ".join(str(d) for d in s.shape) + ")")
    if s.device != "cpu":
        parts.append(f"on {s.device}")
    parts.append(s.role)
    if s.name:
        parts.append(f"`{s.name}`")
    return " ".join(parts)


def holder_text(h: HolderPath) -> str:
    """``epoch_logits[31]  (leaky_train.py:30 `epoch_logits.append(logits)`)``."""
    text = h.path
    if h.detail:
        text += f" [{h.detail}]"
    if h.file and h.line:
        where = f"{os.path.basename(h.file) or h.file}:{h.line}"
        text += f"  ({where} `{h.code}`)" if h.code else f"  ({where})"
    return text


def made_text(s: HeldStorage, moment: HoldersMoment) -> str | None:
    """``made in step 3 at train.py:25 in main <- train.py:40 in <module>`` (--lines)."""
    if not moment.lines:
        return None
    if not s.stack:
        return ("made in a step that was not profiled" if s.device == "cpu"
                else f"made on {s.device} outside the profiled steps (no allocator stack)")
    user = [f for f in s.stack if f.user] or list(s.stack[:1])
    frames = " <- ".join(f"{os.path.basename(f.file) or f.file}:{f.line} in {f.function}"
                         for f in user[:4])
    return f"made in {s.made_in or 'a step that was not profiled'} at {frames}"


def _ordered(capture: Capture) -> list[HoldersMoment]:
    rank = {w: i for i, w in enumerate(HOLDER_MOMENTS)}
    return sorted(capture.holders, key=lambda m: rank.get(m.when, len(rank)))


def print_holders(capture: Capture, console: Console) -> None:
    """Print the section for an already escaped ``capture`` (nothing without moments)."""
    moments = _ordered(capture)
    for moment in moments:
        console.print()
        console.print(Text(moment_title(moment, capture), style="bold"))
        for s in moment.storages:
            console.print(Text(f"  {storage_text(s)}"))
            for h in s.holders:
                console.print(Text(f"    held by {holder_text(h)}"))
            if s.unreached:
                console.print(Text(f"    not held by any path: {s.unreached}", style="yellow"))
            made = made_text(s, moment)
            if made:
                console.print(Text(f"    {made}", style="dim"))
        if moment.note:
            console.print(Text(f"  note: {moment.note}", style="dim"))
    if moments and not any(m.lines for m in moments):
        console.print(Text(UNKNOWN_SITE, style="dim"))


def holders_context(capture: Capture) -> dict[str, Any] | None:
    """The HTML page's view of the section (None without moments)."""
    if not capture.holders:
        return None
    moments = []
    for moment in _ordered(capture):
        moments.append({"title": moment_title(moment, capture), "note": moment.note,
                        "lines": moment.lines,
                        "storages": [{"text": storage_text(s),
                                      "holders": [holder_text(h) for h in s.holders],
                                      "unreached": s.unreached, "made": made_text(s, moment)}
                                     for s in moment.storages]})
    return {"moments": moments, "lines": any(m.lines for m in capture.holders),
            "unknown": UNKNOWN_SITE}
