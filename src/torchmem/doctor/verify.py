"""Prove a fix by re-running the script with it applied.

For a finding whose fix is an edit (:class:`~torchmem.model.capture.FixEdit`), the edited
source is written to a temporary file and the script runs again under ``torchmem
doctor`` in a subprocess, *as the original*: the edited source is compiled under the
script's own file name, so ``__file__``, ``sys.path[0]`` (sibling imports) and the working
directory are those of the original run; the same arguments, the same ``--steps`` limit
(none when the original ran to its end). The re-run's stdout and stderr are captured and
never reach the user; its stdin is empty.

Outcome, recorded on the finding as a :class:`~torchmem.model.capture.Verification`:

* **verified**: the re-run ended with the same exit code (and, when the original raised,
  the same exception type), the diagnosed cause is gone (no finding names the culprit, or
  only as a plain growing container: a list the script fills on purpose, now without
  graphs or pinned storages, which the reason then says), and memory growth fell (growth
  verdict no longer *growing*, or the slope fell by at least half the finding's share);
* **not verified**: the edited script ran, but the culprit still grows (or growth did not
  fall): the fix is kept and the report says it was not proven;
* **crashed**: the edited script ended differently (an exception the original did not
  raise, another exit code): the next valid edit is tried (``.detach()`` after
  ``.item()``); when none works the edit is withdrawn and the fix becomes advice;
* **not checked**: nothing was re-run, and ``reason`` says why (the statement is in
  another file, a distributed run, the re-run timed out...).

Cost: one doctor run of the script per edit tried (about the original run's time), at
most :data:`MAX_RERUNS` re-runs per report. A re-run executes the script again, with its
side effects (files it writes are written again).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

from torchmem.doctor.edits import apply_edit
from torchmem.doctor.fixes import edit_text, fix_for
from torchmem.doctor.target import Target
from torchmem.model.capture import Finding, FixEdit, Growth, Verification
from torchmem.units import format_bytes

__all__ = ["SHORT_RUN_S", "MAX_RERUNS", "Original", "verify_findings", "should_verify"]

#: runs at most this long (seconds) are verified by default: a re-run costs about as
#: much again, so the doctor takes at most about twice as long as a minute's run
SHORT_RUN_S = 60.0
#: most re-runs one report spends on verification (edits and their fallbacks together)
MAX_RERUNS = 3
#: a re-run may take this many times the original run's time (plus a minute) before
#: it is stopped and the fix counted as not checked
TIMEOUT_FACTOR = 3.0


@dataclasses.dataclass(frozen=True)
class Original:
    """What the verification needs to know about the original run."""

    target: Target
    script_file: str
    exit_code: int
    error: str | None
    growth: Sequence[Growth]
    steps: int
    max_steps: int | None
    duration_s: float


def should_verify(forced: bool | None, duration_s: float, deep: bool) -> bool:
    """Verification is on when asked (``--verify``), off when refused (``--no-verify``)
    and otherwise on for runs of at most :data:`SHORT_RUN_S` seconds with analysis."""
    if forced is not None:
        return forced
    return deep and duration_s <= SHORT_RUN_S


def _world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        return 1


def _growth_rate(growth: Sequence[Growth], device: str) -> tuple[float | None, str | None]:
    for g in growth:
        if g.device == device:
            return g.bytes_per_step, g.verdict
    return None, None


def _error_type(error: str | None) -> str | None:
    return error.split(":", 1)[0].strip() if error else None


@dataclasses.dataclass
class _Rerun:
    capture: dict[str, Any] | None
    reason: str
    seconds: float


def _rerun(original: Original, edit: FixEdit, timeout: float) -> _Rerun:
    """Run the script with ``edit`` applied under ``torchmem doctor``; read its capture."""
    started = time.perf_counter()
    with open(edit.file, encoding="utf-8") as fh:
        source = fh.read()
    edited = apply_edit(source, edit)
    with tempfile.TemporaryDirectory(prefix="torchmem-verify-") as tmp:
        edited_path = os.path.join(tmp, "edited.py")
        capture_path = os.path.join(tmp, "capture.json")
        with open(edited_path, "w", encoding="utf-8") as fh:
            fh.write(edited)
        target = original.target
        where = [target.path] if target.path is not None else ["-m", target.module or ""]
        steps = ["--steps", str(original.max_steps)] if original.max_steps else []
        cmd = [sys.executable, "-m", "torchmem", "doctor", "--no-verify", "--quiet",
               "--interval", "0", "--rank-timeout", "0", "--json", capture_path,
               "--edited-source", edited_path, *steps, *where, *target.args]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, env=env, check=False)
        except subprocess.TimeoutExpired:
            return _Rerun(None, f"the edited script ran longer than {timeout:.0f} s",
                          time.perf_counter() - started)
        seconds = time.perf_counter() - started
        try:
            with open(capture_path, encoding="utf-8") as fh:
                capture = json.load(fh)
        except (OSError, ValueError):
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return _Rerun(None, "the re-run wrote no capture"
                          + (f" ({tail[-1][:160]})" if tail else ""), seconds)
    return _Rerun(capture, "", seconds)


def _judge(finding: Finding, original: Original, edit: FixEdit,
           run: _Rerun) -> Verification:
    device = finding.device
    before, _ = _growth_rate(original.growth, device)
    base: dict[str, Any] = {"device": device, "bytes_per_step_before": before,
                            "exit_code_before": original.exit_code,
                            "steps_before": original.steps, "seconds": round(run.seconds, 2)}
    capture = run.capture
    if capture is None:
        return Verification(status="not checked", reason=run.reason, **base)
    growth = tuple(Growth.from_dict(g) for g in capture.get("growth") or ())
    after, verdict = _growth_rate(growth, device)
    code, error = capture.get("exit_code"), capture.get("error")
    steps = len(capture.get("steps") or ())
    base.update(bytes_per_step_after=after, exit_code_after=code, steps_after=steps)
    if code != original.exit_code or (code != 0 and
                                      _error_type(error) != _error_type(original.error)):
        what = error or f"exit code {code}"
        return Verification(status="crashed", reason=f"`{edit.statement}` made the script end "
                            f"differently: {what} (the original: "
                            f"{original.error or f'exit code {original.exit_code}'})", **base)
    name = finding.culprit.name if finding.culprit else None
    about = [f for f in capture.get("findings") or ()
             if name is not None and (f.get("culprit") or {}).get("name") == name]
    # the diagnosed cause is gone when no finding about the culprit remains but a plain
    # growing container (a list the script fills on purpose, now without graphs or views)
    same = [f for f in about if f.get("cause") == finding.cause
            or finding.cause == "growing_container" or f.get("cause") != "growing_container"]
    rates = f"{_rate(before)} to {_rate(after)}"
    fell = verdict != "growing" or (before is not None and after is not None
                                    and after <= before - 0.5 * finding.bytes_per_step)
    left = (f"; `{name}` still grows by the values it keeps (growing_container: bound it or "
            "store summaries)") if about and not same else ""
    if same:
        causes = ", ".join(sorted({str(f.get("cause")) for f in same}))
        return Verification(status="not verified", reason=f"with `{edit.statement}`, `{name}` "
                            f"still grows ({causes}); growth per step went from {rates}", **base)
    if not fell:
        return Verification(status="not verified", reason=f"with `{edit.statement}`, the "
                            f"{finding.cause} of `{name}` is gone but memory growth did not "
                            f"fall by half of this finding's share ({rates}){left}", **base)
    return Verification(status="verified", reason=f"growth fell from {rates}; the edited "
                        f"script ran {steps} steps to the end with the same exit code "
                        f"({code}){left}", **base)


def _rate(value: float | None) -> str:
    return "?" if value is None else f"{format_bytes(value)}/step"


def _not_checked(finding: Finding, original: Original, reason: str) -> Verification:
    before, _ = _growth_rate(original.growth, finding.device)
    return Verification(status="not checked", reason=reason, device=finding.device,
                        bytes_per_step_before=before, exit_code_before=original.exit_code,
                        steps_before=original.steps)


def _verify_one(finding: Finding, original: Original, budget: list[int],
                say: Callable[[str], None]) -> Finding:
    edits = [e for e in (finding.edit, *finding.alternatives) if e is not None]
    if os.path.realpath(edits[0].file) != os.path.realpath(original.script_file):
        return dataclasses.replace(finding, verification=_not_checked(
            finding, original, f"the statement is in {os.path.basename(edits[0].file)}, not in "
                               "the script that runs; only the script is re-run edited"))
    timeout = TIMEOUT_FACTOR * original.duration_s + 60.0
    tried: list[str] = []
    seconds = 0.0
    last: Verification | None = None
    for i, edit in enumerate(edits):
        if budget[0] <= 0:
            last = last or _not_checked(finding, original, f"only {MAX_RERUNS} re-runs per report")
            break
        budget[0] -= 1
        say(f"verifying the fix for `{finding.culprit.name if finding.culprit else finding.cause}`: "
            f"re-running the script with `{edit.statement}`")
        try:
            run = _rerun(original, edit, timeout)
        except (OSError, ValueError, UnicodeError) as err:
            run = _Rerun(None, f"cannot re-run the script edited: {err}", 0.0)
        seconds += run.seconds
        result = _judge(finding, original, edit, run)
        result = dataclasses.replace(result, seconds=round(seconds, 2), tried=tuple(tried))
        last = result
        if result.status != "crashed":
            if i == 0:
                return dataclasses.replace(finding, verification=result)
            others = tuple(e for e in edits if e is not edit)
            return dataclasses.replace(finding, verification=result, edit=edit,
                                       alternatives=others[1:] if others else (),
                                       fix=edit_text(finding.cause, edit))
        tried.append(result.reason)
    assert last is not None
    if last.status == "crashed":
        name = finding.culprit.name if finding.culprit else ""
        advice = fix_for(finding.cause, name, None)
        fix = (f"{advice} (no edit proven: {'; '.join(tried)})")
        return dataclasses.replace(finding, verification=last, edit=None, alternatives=(),
                                   fix_kind="advice", fix=fix)
    return dataclasses.replace(finding, verification=last)


def verify_findings(findings: Sequence[Finding], original: Original,
                    say: Callable[[str], None] = lambda _: None) -> list[Finding]:
    """``findings`` with a :class:`Verification` on each finding whose fix is an edit.

    Never raises for what happens in the re-run; an interruption (Ctrl-C) stops the
    verification and leaves the remaining fixes *not checked*.
    """
    out = list(findings)
    if _world_size() > 1:
        return [dataclasses.replace(f, verification=_not_checked(
            f, original, "distributed runs (torchrun) are not re-run")) if f.edit else f
            for f in out]
    budget = [MAX_RERUNS]
    for i, finding in enumerate(out):
        if finding.edit is None:
            continue
        try:
            out[i] = _verify_one(finding, original, budget, say)
        except KeyboardInterrupt:
            out[i:] = [dataclasses.replace(f, verification=_not_checked(
                f, original, "verification interrupted")) if f.edit else f for f in out[i:]]
            break
        except Exception as err:  # noqa: BLE001 - verification never breaks the report
            out[i] = dataclasses.replace(finding, verification=_not_checked(
                finding, original, f"verification failed: {type(err).__name__}: {err}"))
    return out
