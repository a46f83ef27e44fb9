"""Findings from the probe's records rather than from path snapshots.

Cyclic garbage found by the private collections (``reference_cycle``), gradients that
accumulate across optimizer steps (``grad_not_cleared``), and the CUDA allocator's
state (``cache_thrash``, ``fragmentation``). :func:`torchmem.doctor.diagnosis.diagnose`
ranks them with the path findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchmem.doctor.fixes import TITLES, fix_for
from torchmem.doctor.zero_grad_site import receiver
from torchmem.doctor.source import Statement
from torchmem.model.capture import Culprit, Finding
from torchmem.units import KiB, format_bytes

if TYPE_CHECKING:
    from torchmem.doctor.evidence import Evidence, GradCheck

__all__ = ["cycle_findings", "grad_findings", "cuda_findings", "MIN_GARBAGE_BYTES"]

#: tensor bytes found in cyclic garbage at one boundary below which cycles are ignored
MIN_GARBAGE_BYTES = 64 * KiB


def cycle_findings(ev: Evidence) -> list[Finding]:
    hits = [g for g in ev.garbage if g.tensor_bytes >= MIN_GARBAGE_BYTES]
    if not hits or (len(hits) < 2 and len(ev.garbage) >= 2):
        return []
    last = hits[-1]
    per_step = sum(g.tensor_bytes for g in hits) / max(sum(g.steps_since for g in hits), 1)
    anchor = next((a for a in last.anchors if a[3]), last.anchors[0] if last.anchors else None)
    culprit = None
    if anchor is not None:
        culprit = Culprit(name=anchor[1], kind="cycle", file=anchor[2], line=anchor[3], code=anchor[4])
    evidence = [f"a collection at step {g.step} freed {g.objects} unreachable objects holding "
                f"{format_bytes(g.tensor_bytes)} of tensors ({g.steps_since} steps since the "
                f"previous one)" for g in hits[-2:]]
    evidence.append("these tensors were reachable only through reference cycles: they stay "
                    "alive until Python's cyclic garbage collector runs, not when the step ends")
    if last.anchors:
        evidence.append("in the garbage: " + "; ".join(a[0] for a in last.anchors[:4]))
    fix = fix_for("reference_cycle", "", None)
    if anchor is not None and anchor[0].startswith("exception"):
        held = anchor[0].split("`")[1] if "`" in anchor[0] else "it"
        fix = (f"do not keep the exception object: store `str(exc)` or "
               f"`traceback.format_exc()` in `{held}` instead, or `del {held}` before the "
               "function returns (the traceback's frames hold every local of the step)")
    elif anchor is not None and anchor[0].startswith("closure"):
        fix = ("the closure captures the object that stores it, which makes a cycle: make it a "
               "method, pass what it needs as arguments, or capture `weakref.ref(self)`; "
               "calling gc.collect() only hides it")
    return [Finding(cause="reference_cycle", title=TITLES["reference_cycle"], device="cpu",
                    bytes=last.tensor_bytes, bytes_per_step=round(per_step, 1), culprit=culprit,
                    evidence=tuple(evidence), fix=fix,
                    data={"garbage_objects": last.objects, "garbage_tensor_bytes": last.tensor_bytes,
                          "freed_heap": last.freed_heap},
                    confidence="high" if culprit and culprit.line else "medium")]


def grad_findings(ev: Evidence) -> list[Finding]:
    """``grad_not_cleared`` findings: one per optimizer whose checks show gradients summed
    across its updates (a script with several optimizers gets a check per optimizer)."""
    names = list(dict.fromkeys(c.optimizer_name for c in ev.grad_checks))
    out: list[Finding] = []
    for name in names:
        out += _grad_finding([c for c in ev.grad_checks if c.optimizer_name == name],
                             several=len(names) > 1)
    return out


def _grad_finding(checks: list[GradCheck], several: bool) -> list[Finding]:
    if len(checks) < 3:
        return []
    # gradients that accumulate harm only when they are applied: an interval in which no
    # parameter changed (backward() in a loop without an update) is not evidence
    bad = [c for c in checks if c.accumulated and c.zero_grad_calls == 0 and c.updated is not False]
    if len(bad) < 0.8 * len(checks):
        return []
    last = bad[-1]
    name = last.optimizer_name or ""
    culprit = Culprit(name=name or "gradients", kind="local", file=last.file, line=last.line,
                      code=last.code, type="parameters" if last.manual else "Optimizer")
    evidence = (f"between {len(bad)} of {len(checks)} consecutive optimizer steps the same "
                f".grad tensors kept accumulating and zero_grad() was never called"
                + (f" on `{name}` (nor on a module holding its parameters)"
                   if several and name and not last.manual else ""),
                "memory does not grow (gradients are summed in place): the updates are wrong, "
                "each step applies the sum of all gradients so far")
    once = last.zero_site
    if once is not None and several and not last.manual and last.optimizer_name \
            and receiver(once[2]) not in (None, last.optimizer_name):
        once = None  # another optimizer's zero_grad(): it does not clear these gradients
    if once is not None:  # zero_grad() ran, once, before the loop that runs the steps
        file, line, code, function = once
        name = receiver(code) or name
        culprit = Culprit(name=name or "gradients", kind="local", file=file, line=line,
                          code=code, function=function)
        evidence = (f"`{code}` (line {line}, in `{function}`) clears the gradients outside "
                    f"the loop that runs the steps: between steps it does not run",
                    *evidence)
        fix = (f"move `{code}` (line {line}) into the loop, so that it runs once per optimizer "
               f"step, before `backward()`")
    else:
        fix = (f"clear the gradients after each update: `for p in {name}: p.grad = None` "
               "(or `p.grad.zero_()`) before the next `backward()`" if last.manual
               else fix_for("grad_not_cleared", name, None))
    return [Finding(cause="grad_not_cleared", title=TITLES["grad_not_cleared"], device="cpu",
                    bytes=last.grad_bytes, bytes_per_step=0.0, culprit=culprit,
                    evidence=evidence,
                    fix=fix,
                    data={"checks": len(checks), "accumulating": len(bad)}, confidence="high")]


def cuda_findings(ev: Evidence, steps: int) -> list[Finding]:
    out: list[Finding] = []
    if steps >= 4 and ev.empty_cache_steps >= 0.8 * steps:
        site = ev.empty_cache_site
        stmt = Statement(site[0], site[1], site[2], "call", "", True) if site else None
        culprit = Culprit(name="torch.cuda.empty_cache", kind="unknown", file=site[0] if site else None,
                          line=site[1] if site else None, code=site[2] if site else None)
        device = next(iter(ev.allocator), "cuda:0")
        alloc = ev.allocator.get(device, {})
        evidence = [f"torch.cuda.empty_cache() ran in {ev.empty_cache_steps} of {steps} steps"]
        if alloc.get("device_allocs"):
            evidence.append(f"{alloc['device_allocs']} cudaMalloc and {alloc.get('device_frees', 0)} "
                            f"cudaFree calls by step {alloc.get('last_step')}: the cache is "
                            "refilled from the driver after every flush")
        out.append(Finding(cause="cache_thrash", title=TITLES["cache_thrash"],
                           device=device, culprit=culprit,
                           evidence=tuple(evidence),
                           fix=fix_for("cache_thrash", "", stmt), confidence="high",
                           data={"empty_cache_steps": ev.empty_cache_steps}))
    for device, stats in ev.allocator.items():
        if stats.get("verdict") == "fragmented":
            advice = stats.get("advice") or []
            out.append(Finding(cause="fragmentation", title=TITLES["fragmentation"], device=device,
                               bytes=int(stats.get("inactive_split", 0)),
                               culprit=Culprit(name="CUDA caching allocator", kind="unknown"),
                               evidence=tuple(stats.get("evidence", ())),
                               fix=" ".join(advice) or fix_for("fragmentation", "", None),
                               data={k: v for k, v in stats.items() if k not in ("evidence", "advice")},
                               confidence="medium"))
    return out
