"""Whether tensors in cyclic garbage cost memory worth a finding.

A reference cycle delays freeing: what it holds stays alive until the cyclic collector
runs, not when the step ends. Whether that matters is a matter of size. The cost of the
delay is at most what the collector freed at once (:attr:`GarbageRecord.tensor_bytes`,
the finding's ``garbage_tensor_bytes``): that much is alive on top of what the script
holds at the time. It is weighed against the memory the steps use: the CPU heap's peak
less its lowest reading at a step boundary (the memory the run adds to what it started
its steps with). A cycle that holds less than :data:`MIN_SHARE` of that raises the peak
by less than that share: the finding is dropped, and the report says so in a note
with both numbers.

Measured on every script with a ``reference_cycle`` finding from cyclic garbage across
the corpora and unit scripts (``docs/doctor.md``): the share was 0.18 to 1.07 for the
cycles their reports describe, and 0.005 for a healthy U-Net whose per-step closures
made a cycle of 224 KiB against 45 MiB of step memory.

CUDA tensors are weighed against device memory, which this does not read: when a CUDA
device was used, every cycle finding is kept.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from torchmem.model.capture import Finding
from torchmem.units import format_bytes

__all__ = ["with_costly_cycles", "costly_cycles", "MIN_SHARE"]

#: the least share of the steps' memory (peak less the lowest step reading) that the
#: tensors freed by one collection of cyclic garbage must reach to be a finding
MIN_SHARE = 0.05


def with_costly_cycles(findings: list[Finding], run: Any) -> tuple[list[Finding], list[str]]:
    """``findings`` without the cyclic-garbage findings too small to matter in ``run`` (its
    step readings and peaks), and a note for each one dropped."""
    from torchmem.doctor._summary import peaks

    return costly_cycles(findings, run.steps, peaks(run))


def costly_cycles(findings: list[Finding], steps: Sequence[Any],
                  peak: Mapping[str, int]) -> tuple[list[Finding], list[str]]:
    """:func:`with_costly_cycles` on plain data: the step records and the peak per device."""
    if any(device.startswith("cuda") and used for device, used in peak.items()):
        return findings, []
    readings = [r.used["cpu"] for r in steps if "cpu" in getattr(r, "used", {})]
    top = peak.get("cpu")
    if not readings or not top or top <= min(readings):
        return findings, []
    span = top - min(readings)
    kept, notes = [], []
    for f in findings:
        held = f.data.get("garbage_tensor_bytes") if f.cause == "reference_cycle" else None
        if isinstance(held, int) and held < MIN_SHARE * span:
            notes.append(f"reference cycles held {format_bytes(held)} of tensors until the "
                         f"cyclic garbage collector freed them: {held / span:.1%} of the "
                         f"{format_bytes(span)} the steps use (peak less the lowest step "
                         f"reading), too little to raise the peak; not reported as a finding")
            continue
        kept.append(f)
    return kept, notes
