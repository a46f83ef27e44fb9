"""All findings of a run, from every mechanism, ranked.

:func:`diagnose` asks each mechanism for its findings, in an order that lets the later
ones know what the earlier explained: the variables' paths (:mod:`torchmem.doctor.causes`,
on the paths that :mod:`torchmem.doctor.path_trend` finds growing), cycles in autograd
after ``create_graph`` and cyclic garbage (:mod:`torchmem.doctor.held`,
:mod:`torchmem.doctor.record_findings`), containers of Python objects
(:mod:`torchmem.doctor.object_growth`), graphs that only autograd keeps
(:mod:`torchmem.doctor.autograd_held`), gradients never cleared, growth nothing in Python
explains, memory held since a stretch of steps (:mod:`torchmem.doctor.filled_held`) and
the CUDA allocator's state; then ranks them, largest growth first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from torchmem.doctor.autograd_held import autograd_held_findings, share_with_paths
from torchmem.doctor.causes import path_findings
from torchmem.doctor.evidence import Evidence
from torchmem.doctor.filled_held import filled_findings
from torchmem.doctor.held import grad_cycle_findings, merge_grad_findings, untracked_findings
from torchmem.doctor.object_growth import container_findings
from torchmem.doctor.path_trend import growing_paths
from torchmem.doctor.leaf_grads import leaf_grad_findings
from torchmem.doctor.record_findings import cuda_findings, cycle_findings, grad_findings
from torchmem.model.capture import CAUSES, Finding, Growth

__all__ = ["diagnose"]


def _path_findings(ev: Evidence, growth: dict[str, Growth]) -> list[Finding]:
    snaps = [s for s in ev.snapshots if s.paths]
    if len(snaps) < 2:
        return []
    cpu = growth.get("cpu")
    saw = 0.5 * cpu.bytes_per_step if cpu is not None and cpu.stretches else None
    growing = growing_paths(snaps, saw)
    paths, peaks = dict(snaps[-1].paths), {}
    for path, sig in growing.items():
        if sig.get("resets"):  # emptied now and then: described where it was largest
            step, paths[path] = max(((s.step, s.paths[path]) for s in snaps if path in s.paths),
                                    key=lambda sp: (sp[1].graph_nodes, sp[1].retained_bytes))
            peaks[path] = step
    return path_findings(ev, growing, paths, [s.step for s in snaps], growth, peaks=peaks)


def diagnose(ev: Evidence, growth: Sequence[Growth] = ()) -> list[Finding]:
    """All findings from the evidence, largest bytes first (ties in :data:`CAUSES` order).

    Args:
        ev: what the probe gathered.
        growth: growth verdicts per device (used to attribute the measured slope).

    Returns:
        Findings; empty when nothing is wrong.
    """
    by_device = {g.device: g for g in growth}
    snaps = [s for s in ev.snapshots if s.paths or s.unreached is not None]
    paths = merge_grad_findings(_path_findings(ev, by_device))
    findings = grad_cycle_findings(snaps, ev.create_graph_site, ev.steps) + cycle_findings(ev)
    explained = bool(findings) or bool(paths)
    python = container_findings(snaps, by_device.get("cpu"), ev.steps, explained,
                                trains=ev.backward_steps >= 0.5 * ev.steps)
    # graphs that no variable reaches are a mechanism of their own beside what variables
    # hold: reported with the paths, each finding sized by its own share of the heap
    held = autograd_held_findings(snaps, by_device.get("cpu"), ev.steps,
                                  bool(findings) or bool(python))
    held, paths = share_with_paths(held, paths, by_device.get("cpu"))
    findings = paths + findings + grad_findings(ev) + python + held
    findings += untracked_findings(snaps, by_device.get("cpu"), ev.steps, ev.native_call_steps,
                                   ev.native_call_sites, ev.backward_site,
                                   explained or bool(python) or bool(held))
    findings += filled_findings(snaps, ev.steps,
                                any(f.cause != "grad_not_cleared" for f in findings))
    findings += leaf_grad_findings(ev.leaf_grads, findings)
    findings += cuda_findings(ev, ev.steps)
    findings = [f if f.fix_kind or not f.fix else replace(f, fix_kind="advice") for f in findings]
    findings.sort(key=lambda f: (-f.bytes_per_step, -f.bytes, CAUSES.index(f.cause)))
    return findings
