"""The CUDA allocator's statistics at the doctor's analysis steps (fragmentation evidence).

At each deep-analysis boundary, :func:`judge_allocators` reads
``torch.cuda.memory_stats`` of every initialised device, judges it
(:func:`torchmem.analyze.fragmentation.judge`) and counts, per device, at how many
boundaries the allocator was fragmented; a device fragmented at two boundaries or more,
and at half of them at least, gets the verdict ``fragmented`` with its evidence
(read by :mod:`torchmem.doctor.record_findings`). Nothing happens without CUDA.
"""

from __future__ import annotations

from typing import Any

__all__ = ["judge_allocators"]


def judge_allocators(allocator: dict[str, dict[str, Any]], step: int) -> None:
    """Judge each initialised CUDA device's allocator at ``step``, into ``allocator``
    (device -> counters and the last verdict, plain data)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    from torchmem.analyze.fragmentation import judge

    for index in range(torch.cuda.device_count()):
        device = f"cuda:{index}"
        stats = torch.cuda.memory_stats(index)
        verdict = judge(stats, device)
        entry = allocator.setdefault(device, {"judged": 0, "fragmented": 0})
        entry["judged"] += 1
        fragmented = verdict.verdict == "fragmented" or (
            verdict.verdict == "pressure" and verdict.ratio >= 0.2)
        entry["fragmented"] += fragmented
        entry.update(last_step=step, last_verdict=verdict.verdict,
                     inactive_split=verdict.inactive_split, reserved=verdict.reserved,
                     allocated=verdict.allocated, alloc_retries=verdict.alloc_retries,
                     explanation=verdict.explanation, advice=list(verdict.advice[:2]),
                     device_allocs=int(stats.get("num_device_alloc", 0) or 0),
                     device_frees=int(stats.get("num_device_free", 0) or 0))
        if entry["fragmented"] >= 2 and entry["fragmented"] >= entry["judged"] / 2:
            entry["verdict"] = "fragmented"
            entry["evidence"] = [verdict.explanation,
                                 f"judged fragmented at {entry['fragmented']} of "
                                 f"{entry['judged']} analysis steps"]
