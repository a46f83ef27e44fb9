"""What a finding's confidence may say, given how the device's memory was measured to move.

A finding about growth -- a path that keeps more graphs, tensors or hooks at every analysed
step -- rests on two kinds of evidence: the path's own counts across the probe's snapshots,
and the device's per-step memory series (:mod:`torchmem.analyze.growth`). ``high`` is earned
only when both agree. When the device's verdict is ``undecided`` (too few steps, too noisy)
the finding is at most ``medium`` and says why; when the device's memory is ``flat`` it is
``low``: what the path adds is below what the device's memory shows.

Findings that do not claim growth keep the confidence their own evidence gave them:
gradients accumulated by a missing ``zero_grad()`` (a correctness problem at constant
memory), allocator findings (fragmentation, cache thrash) and the explanation of an autograd
error the script died of (the error itself is the evidence).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from torchmem.model.capture import Finding, Growth
from torchmem.units import format_bytes

__all__ = ["GROWTH_CAUSES", "calibrate"]

#: causes whose finding says "this keeps more memory at every step"
GROWTH_CAUSES = frozenset({
    "retained_graph", "hidden_state_chain", "backward_flags_graph", "eval_graph",
    "view_pins_storage", "reference_cycle", "growing_container",
})

_RANK = {"low": 0, "medium": 1, "high": 2}


def _at_most(confidence: str, cap: str) -> str:
    return cap if _RANK.get(confidence, 2) > _RANK[cap] else confidence


def _signed(n: float) -> str:
    return ("+" if n >= 0 else "") + format_bytes(n)


def _sentence(g: Growth | None, device: str) -> tuple[str, str]:
    """(cap, sentence) for a device whose memory was not measured to grow."""
    if g is None:
        return "medium", (f"{device} memory was not measured per step: this finding rests on "
                          f"the culprit's own growth across the analysed steps only")
    if g.verdict == "flat":
        return "low", (f"{device} memory is flat over steps {g.first_step}-{g.last_step} "
                       f"({_signed(g.bytes_per_step)}/step): what the culprit "
                       f"adds is below what the device's memory shows")
    reason = g.reason.rstrip(".") if g.reason else "the series does not decide it"
    return "medium", (f"whether {device} memory grows is undecided ({reason}); this finding "
                      f"rests on the culprit's own growth across the analysed steps")


def calibrate(findings: Sequence[Finding], growth: Sequence[Growth]) -> list[Finding]:
    """The findings, with the confidence of growth findings capped by the device's verdict.

    A capped finding gains one evidence sentence saying why, and ``data["device_growth"]``
    (the device's verdict) so tools see the same reason.
    """
    by_device = {g.device: g for g in growth}
    out: list[Finding] = []
    for f in findings:
        g = by_device.get(f.device)
        if f.cause not in GROWTH_CAUSES or "error" in f.data or (
                g is not None and g.verdict == "growing"):
            out.append(f)
            continue
        cap, sentence = _sentence(g, f.device)
        if "fill_steps" in f.data and g is not None and g.verdict == "flat":
            # growth that stopped (doctor/filled_held.py): held memory, not a slope
            sentence = (f"{f.device} memory is flat over steps {g.first_step}-{g.last_step} "
                        f"({g.reason}): this finding is memory held since steps "
                        f"{f.data['fill_steps'][0]}-{f.data['fill_steps'][1]}, not growth "
                        "that continues")
        out.append(dataclasses.replace(
            f, confidence=_at_most(f.confidence, cap), evidence=(*f.evidence, sentence),
            data={**f.data, "device_growth": g.verdict if g is not None else "unmeasured"}))
    return out
