"""The doctor's probe: cheap bookkeeping every step, deep analysis at a few boundaries.

Every step (cost: a few attribute updates) the probe counts ``backward()`` calls and
their ``retain_graph``/``create_graph`` flags (and keeps weak references to the tensors a
retained backward starts from: :mod:`torchmem.doctor.backward_roots`), ``zero_grad()`` and
``empty_cache()`` calls. A ``gc.callbacks`` hook counts what the automatic collector finds (no work
unless a collection runs).

At a few step boundaries only -- steps 2, 4, 8, 16, ... (doubling, so ``log2(N)``
times in N steps) and the last step of ``--steps`` -- it runs the deep analysis:

* a :func:`~torchmem.doctor.culprit.take_snapshot` of everything the script's
  variables reach (cost proportional to those objects and their graph nodes);
* a gradient check between this step and the next (:mod:`torchmem.doctor.grad_watch`:
  gradients a backward adds to without clearing, no ``zero_grad``, parameters updated);
* when the collector found cycles since the last boundary or memory is rising, a
  private ``gc.collect()`` with ``DEBUG_SAVEALL`` to see which tensors only cyclic
  garbage holds (the garbage is released right after);
* on CUDA, the allocator statistics (fragmentation).

At the end (however the script ended) it turns that evidence into findings
(:func:`torchmem.doctor.diagnosis.diagnose`), plus what grows within evaluation passes
(:mod:`torchmem.doctor.pass_evidence`). The census of live tensors (largest storages,
bytes by role, who holds them) is taken at new highs of the step readings, within a time
budget, at the failure point and at the end (:mod:`torchmem.doctor.census_holders`).
It holds no tensor of the script between calls: snapshots are plain data, parameters are
held by weak references.

A part of the analysis that fails (an exception inside torchmem) never stops the other
parts and is never silent: the error is recorded, named in the report's notes, and the
report says that the analysis was incomplete instead of giving a clean bill of health.

Known limitations:
    * Analysis happens at optimizer (or backward) step boundaries; memory kept only by
      frames that are not on the stack at that moment (a finished ``evaluate()``) is
      seen only if something still references it.
"""

from __future__ import annotations

import gc
from types import FrameType
from typing import Any

from torchmem.doctor.allocator_watch import judge_allocators
from torchmem.doctor.backward_roots import BackwardRoots
from torchmem.doctor.causes import Evidence
from torchmem.doctor.diagnosis import diagnose
from torchmem.doctor.census_holders import PeakCensus
from torchmem.doctor.confidence import calibrate
from torchmem.doctor.culprit import read_locals, take_snapshot
from torchmem.doctor.leaf_grads import LeafGrads
from torchmem.doctor.snapshot_sites import SnapshotSites
from torchmem.doctor.grad_watch import GradWatch
from torchmem.doctor.zero_grad_site import ZeroGradSite
from torchmem.doctor.pass_evidence import PassEvidence
from torchmem.doctor.runner import Outcome, Probe, Run
from torchmem.doctor.source import frame_site

__all__ = ["DoctorProbe", "analysis_steps", "ANALYSIS_FAILED"]

#: how every note about a failed part of the analysis starts (renderers look for it)
ANALYSIS_FAILED = "analysis incomplete:"


def analysis_steps(step: int) -> bool:
    """True at the steps where the deep analysis runs: 2, 3, 4, 6, 8, 12, 16, 24, 32, 48...

    Two per doubling (``2**k`` and ``1.5 * 2**k``), so that snapshots do not all fall on the
    same phase of an epoch whose length is a power of two.
    """
    if step < 2:
        return False
    if step & (step - 1) == 0:
        return True
    third = step // 3
    return step % 3 == 0 and third & (third - 1) == 0


class DoctorProbe(Probe):
    """Collects the doctor's evidence during a run and diagnoses it at the end.

    Args:
        deep: run the deep analysis at the boundaries (False: growth verdict only).
        census_at_end: take censuses of the live tensors, with who holds the largest:
            at the peak, at the failure point and at the end (see
            :mod:`torchmem.doctor.census_holders`).

    Attributes (after the run):
        findings: the diagnosed findings, largest first.
        growth: growth verdicts per device.
        evidence: the raw evidence (snapshots etc.), plain data.
        census: the most recent census (or None); ``census_step`` says when.
        analysis_s: seconds spent in deep analysis.
        errors: the analysis failures, one line each (``part at step N: Error: text``).
    """

    def __init__(self, deep: bool = True, census_at_end: bool = True) -> None:
        self.deep = deep
        self.census_at_end = census_at_end
        self.evidence = Evidence()
        self.passes = PassEvidence()
        self.findings: list[Any] = []
        self.growth: list[Any] = []
        self.peaks = PeakCensus()
        self.analysis_s = 0.0
        self.notes: list[str] = []
        self._errors: dict[str, list[Any]] = {}  # part+error -> [first line, count]
        self._reset_step_counters()
        self._gc_found = 0
        self._gc_callback_installed = False
        self._grads = GradWatch()
        self._sites = SnapshotSites()  # where the steps end: snapshots at the usual place
        self._leaf_grads = LeafGrads()
        self._zero_site = ZeroGradSite()
        self._last_garbage_step = 0
        self._full_done = False
        self.crash: Any = None
        self._samples: dict[str, list[Any]] = {}
        self._leaf_names: Any = None
        self._unreached: Any = None  # UnreachedSchedule in deep mode
        self._native: Any = None
        self._roots = BackwardRoots()

    # -- per-step bookkeeping ---------------------------------------------------
    def _reset_step_counters(self) -> None:
        self._backward = 0
        self._retain = False
        self._create = False
        self._zero = 0
        self._empty = 0

    def _gc_callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            self._gc_found += int(info.get("collected", 0) or 0)

    def on_start(self, run: Run) -> None:
        if not self._gc_callback_installed:
            gc.callbacks.append(self._gc_callback)
            self._gc_callback_installed = True
        if self.deep:
            from torchmem.doctor.native_calls import NativeCalls
            from torchmem.doctor.held import MIN_UNTRACKED_PER_STEP
            from torchmem.doctor.unreached import LeafNames, UnreachedSchedule

            self._leaf_names = LeafNames()
            self._unreached = UnreachedSchedule(MIN_UNTRACKED_PER_STEP / 2)
            self._native = NativeCalls(run.frames.is_user_file)
            self._native.install()

    def on_event(self, run: Run, name: str, info: dict[str, Any]) -> None:
        if name == "backward":
            self._backward += 1
            self._retain = self._retain or bool(info.get("retain_graph"))
            self._create = self._create or bool(info.get("create_graph"))
            if self.evidence.backward_site is None:
                self.evidence.backward_site = frame_site(info.get("frame"))
            if self.deep:
                self._guard("leaf gradients", 0, self._leaf_grads.on_backward,
                            info.get("frame"), self.evidence.leaf_grads, read_locals)
            if info.get("retain_graph") and not info.get("create_graph") and self.deep:
                self._guard("backward roots", 0, self._roots.record, info.get("tensors"))
            if info.get("create_graph") and self._leaf_names is not None:
                if self.evidence.create_graph_site is None:
                    self.evidence.create_graph_site = frame_site(info.get("frame"))
                self._guard("naming create_graph leaves", 0, self._leaf_names.record,
                            info.get("frame"), run.frames.is_user_file)
        elif name == "zero_grad":
            self._zero += 1
            if self.deep:  # read only by the gradient checks of the deep analysis
                self._zero_site.record(info.get("frame"), run.frames.is_user_file)
                self._grads.note_zero(info.get("target"))
        elif name == "empty_cache":
            self._empty += 1
            if self.evidence.empty_cache_site is None:
                self.evidence.empty_cache_site = frame_site(info.get("frame"))
        elif name in ("pass_step", "pass_end", "pass_drop"):
            if self.deep:
                self.passes.on_event(run, name, info, self._guard)
            if name == "pass_step" and self.census_at_end:
                self._guard("census", run.step_count, self.peaks.at_pass_step, run, info)
            elif name == "pass_drop":
                self.peaks.drop_pass(info)
        elif name == "step_source":
            self.evidence = Evidence()
            self._samples = {}
            self._sites = SnapshotSites()
            self._reset_step_counters()
            self._grads.reset()
            if self._unreached is not None:
                self._unreached.reset()

    def on_step(self, run: Run, step: int, frame: FrameType | None) -> None:
        ev = self.evidence
        ev.steps = step
        if self._backward:
            ev.backward_steps += 1
            ev.retain_graph_steps += self._retain
            ev.create_graph_steps += self._create
        ev.empty_cache_steps += self._empty > 0
        if self._native is not None:
            for name in self._native.take():
                ev.native_call_steps[name] = ev.native_call_steps.get(name, 0) + 1
            ev.native_call_sites.update(self._native.sites)
        backward, zero = self._backward, self._zero
        self._reset_step_counters()
        if not self.deep:
            return
        snaps = ev.snapshots
        if self._samples and snaps and snaps[-1].step == step - 1:
            for path, refs in self._samples.items():  # one step later: what survived?
                stats = snaps[-1].paths.get(path)
                if stats is not None and refs:
                    stats.survived_next = sum(r() is not None for r in refs) / len(refs)
        if self._grads.pending(step):
            self._guard("gradient check", step, self._finish_grad_check, step, backward, zero,
                        frame, run.frames.is_user_file)
        last = run.max_steps is not None and step >= run.max_steps
        movable = run.step_source in ("forward", "loop")
        if self._sites.due(step, frame, analysis_steps(step), movable) or last or step == 1:
            import time

            t0 = time.perf_counter()
            try:
                if step >= 2:
                    self._guard("garbage inspection", step, self._maybe_collect, run, step)
                    self._guard("variable snapshot", step, self._snapshot, run, step, frame)
                    self._guard("allocator statistics", step, judge_allocators,
                                self.evidence.allocator, step)
                self._guard("gradient check", step, self._grads.start, step, frame,
                            run.main_globals, run.frames.is_user_file, run.outermost)
            finally:
                self.analysis_s += time.perf_counter() - t0
        if self.census_at_end:
            spent = self.peaks.spent
            self._guard("census", step, self.peaks.at_step, run, step, frame, last)
            self.analysis_s += self.peaks.spent - spent

    def _diagnose(self, run: Run) -> None:
        """Findings from the evidence: paths, the heap gap, evaluation passes."""
        try:
            self.findings = calibrate(diagnose(self.evidence, self.growth), self.growth)
            self.notes.extend(dict.fromkeys(self.evidence.notes))
        except Exception as err:  # noqa: BLE001
            self._record_error("diagnosis", 0, err)
            self.findings = []
        try:
            from torchmem.doctor.cycle_cost import with_costly_cycles

            self.findings, dropped = with_costly_cycles(self.findings, run)
            self.notes.extend(dropped)
        except Exception as err:  # noqa: BLE001
            self._record_error("cycle cost", 0, err)
        try:
            from torchmem.doctor.heap_gap import with_heap_gap

            cpu = next((g for g in self.growth if g.device == "cpu"), None)
            self.findings = with_heap_gap(run.steps, cpu, self.evidence.snapshots,
                                          self.findings)
        except Exception as err:  # noqa: BLE001
            self._record_error("allocator diagnosis", 0, err)
        try:
            from torchmem.doctor.holder_statements import with_holder_statements

            self.findings = with_holder_statements(
                self.findings, self.holders(),
                [f.culprit.file for f in self.findings if f.culprit is not None and f.culprit.file])
        except Exception as err:  # noqa: BLE001
            self._record_error("holder statements", 0, err)
        try:
            named = {f.culprit.name for f in self.findings if f.culprit is not None}
            self.findings += [f for f in self.passes.findings(self.evidence.snapshots)
                              if f.culprit is None or f.culprit.name not in named]
        except Exception as err:  # noqa: BLE001
            self._record_error("evaluation-pass diagnosis", 0, err)

    # -- failures -------------------------------------------------------------------
    def _guard(self, part: str, step: int, fn: Any, *args: Any) -> None:
        """Run one part of the analysis; record (never raise, never hide) its failure."""
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001 - a probe must never break the script
            self._record_error(part, step, err)

    def _record_error(self, part: str, step: int, err: BaseException) -> None:
        text = str(err).strip().splitlines()
        what = f"{type(err).__name__}: {text[0]}" if text and text[0] else type(err).__name__
        where = f" at step {step}" if step else ""
        entry = self._errors.setdefault(f"{part}: {what}", [f"{part}{where}: {what}", 0])
        entry[1] += 1

    @property
    def errors(self) -> list[str]:
        """The analysis failures, one line each, first occurrence first."""
        out = []
        for line, count in self._errors.values():
            more = count - 1
            out.append(line + (f" (and {more} more time{'s' if more > 1 else ''})" if more else ""))
        return out

    @property
    def census(self) -> Any:
        """The census of the capture's largest storages (at the failure, else the peak)."""
        return self.peaks.census

    @property
    def census_step(self) -> int | None:
        return self.peaks.step

    def holders(self) -> tuple[Any, ...]:
        """Who holds the largest storages at each moment (plain data)."""
        return tuple(self.peaks.moments.values())

    # -- deep analysis ------------------------------------------------------------
    def _snapshot(self, run: Run, step: int, frame: FrameType | None,
                  final: bool = False) -> None:
        samples: dict[str, list[Any]] = {}
        if self._leaf_names is not None:
            self._leaf_names.prune()
        unreached = self._unreached is not None and (self._unreached.due(
            step, dict(run.steps[-1].used) if run.steps else {},
            self.evidence.create_graph_steps > 0) or final)
        snap = take_snapshot(step, frame, run.main_globals, run.frames.is_user_file,
                             outermost=run.outermost, samples=samples,
                             leaf_names=self._leaf_names, unreached=unreached,
                             previous=self._samples)
        for path, refs in self._samples.items():
            stats = snap.paths.get(path)
            if stats is not None and refs:
                stats.survived = sum(r() is not None for r in refs) / len(refs)
        self._samples = samples  # weak references only: they keep nothing alive
        roots = self.evidence.retained_roots
        for path, count in self._roots.count(samples).items():
            roots[path] = max(roots.get(path, 0), count)
        snaps = self.evidence.snapshots
        snaps.append(snap)
        if len(snaps) > 12:  # the first and the most recent ones are enough
            del snaps[1]

    def _maybe_collect(self, run: Run, step: int) -> None:
        """Inspect cyclic garbage: young generations each boundary, everything when needed."""
        from torchmem.doctor.garbage import inspect_garbage

        full = False
        steps = run.steps
        explained = any(g.tensor_bytes for g in self.evidence.garbage)
        if self._gc_found and len(steps) >= 8 and not explained and not self._full_done:
            a, b = steps[len(steps) // 2], steps[-1]
            if b.step > a.step:
                full = (b.used.get("cpu", 0) - a.used.get("cpu", 0)) / (b.step - a.step) >= 64 * 1024
        self._gc_found = 0
        self._full_done = self._full_done or full
        record = inspect_garbage(step, step - self._last_garbage_step, run.frames.is_user_file,
                                 generation=2 if full else 1)
        self._last_garbage_step = step
        self.evidence.garbage.append(record)

    def _finish_grad_check(self, step: int, backward: int, zero: int, frame: FrameType | None,
                           is_user: Any) -> None:
        for check in self._grads.finish(step, backward, zero, frame):
            if not zero:  # a zero_grad() that ran once, before the loop of the steps?
                check.zero_site = self._zero_site.outside(frame, is_user)
            self.evidence.grad_checks.append(check)

    def on_finish(self, run: Run, outcome: Outcome) -> None:
        if self._native is not None:
            self._native.remove()
        if self._gc_callback_installed:
            try:
                gc.callbacks.remove(self._gc_callback)
            except ValueError:
                pass
            self._gc_callback_installed = False
        failed = outcome.kind in ("oom", "exception", "interrupt") and outcome.frame is not None
        step = run.step_count
        if self.deep and failed:
            snaps = self.evidence.snapshots
            if step > (snaps[-1].step if snaps else 0) + 1:
                self._guard("final analysis", step, self._snapshot, run, step, outcome.frame,
                            True)
        if self.census_at_end or (outcome.kind == "oom" and self.deep):
            # at a failure the traceback keeps the step's objects alive; after a normal
            # end they are often gone: then the census at the peak stands for the end
            self._guard("census", step, self.peaks.finish, run, outcome, step)
        from torchmem.analyze.growth import growth_by_device

        try:
            self.growth = growth_by_device(run.steps)
        except Exception as err:  # noqa: BLE001
            self._record_error("growth verdict", 0, err)
        if self.deep and failed and outcome.exc is not None:
            from torchmem.doctor.crash import explain_crash

            try:
                self.crash = explain_crash(outcome.exc, outcome.frame, run.frames.is_user_file)
            except Exception as err:  # noqa: BLE001
                self._record_error("crash analysis", step, err)
        self._diagnose(run)
        if self.crash is not None:
            self.findings.insert(0, self.crash)
        if self.census is not None and self.census_step:
            self.notes.append(f"largest storages and bytes by role: census at step "
                              f"{self.census_step} of {step}")
        self.notes.extend(f"{ANALYSIS_FAILED} {line}" for line in self.errors)
