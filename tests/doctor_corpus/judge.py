"""Run ``torchmem doctor`` on the corpus and judge its findings against ``manifest.json``.

Shared by ``tests/doctor/test_corpus.py`` (asserts every script) and
``benchmarks/doctor_corpus.py`` (prints the table and the totals). The doctor always runs
through the real command line, in a subprocess, exactly as a user would run it:
``python -m torchmem doctor --json FILE [doctor_args] script.py [script_args]``.

Matching rules (the manifest's ``about`` field says the same):

* A leaky script is *detected* when some finding carries the expected cause or one of
  its ``also`` causes. The highest-ranked such finding is the one judged.
* Its culprit is right when the finding's culprit name equals an accepted name, or
  extends one with a subscript, attribute or closure cell (``metrics['confidence']`` for
  ``metrics``, ``Embedding.forward:func_with_cache`` for ``Embedding.forward``); an
  accepted ``self.attr`` also matches a path that reaches the instance another way and
  takes its ``attr`` (``model.act1._forward_hooks[3].attr``: a hook object that only the
  module's hook dict reaches).
  An empty accepted list means the script has no variable to name (CUDA allocator
  causes): any culprit passes.
* Its line is right when the culprit's file is the script and its line is accepted, or
  lies in the same simple statement as an accepted line (a statement written over several
  lines, such as ``x = (\n a * b\n)``, is one statement whichever of its lines is named).
* A healthy script must have no finding at all; any finding is a false alarm.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

CORPUS_DIR = Path(__file__).resolve().parent
MANIFEST = CORPUS_DIR / "manifest.json"

__all__ = ["Entry", "Result", "load_manifest", "run_doctor", "judge", "run_corpus",
           "cuda_available", "name_matches"]


def statement_lines(path: Path, line: int) -> range:
    """The lines of the innermost simple statement of ``path`` that spans ``line``.

    A compound statement (``for``, ``if``, ``def``...) is not one statement here: only its
    header lines count, so a line in its body never matches the header or a sibling.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return range(line, line + 1)
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        end = node.end_lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            end = body[0].lineno - 1        # a compound statement: its header only
        if node.lineno <= line <= end:
            spans.append(range(node.lineno, end + 1))
    return min(spans, key=len, default=range(line, line + 1))


@dataclass(frozen=True)
class Entry:
    """One corpus script and what the doctor is expected to find in it."""

    script: str
    cause: str
    culprit: tuple[str, ...] = ()
    line: tuple[int, ...] = ()
    also: tuple[str, ...] = ()
    device: str = "cpu"
    doctor_args: tuple[str, ...] = ()
    script_args: tuple[str, ...] = ()
    what: str = ""

    @property
    def healthy(self) -> bool:
        return self.cause == "healthy"

    @property
    def path(self) -> Path:
        return CORPUS_DIR / self.script


@dataclass
class Result:
    """What the doctor reported for one script, and the verdict against the manifest."""

    entry: Entry
    returncode: int | None = None
    seconds: float = 0.0
    error: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    growth: list[dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    capture: dict[str, Any] | None = None

    # -- verdict --------------------------------------------------------------------
    @property
    def judged(self) -> dict[str, Any] | None:
        """The highest-ranked finding with an accepted cause (None if none)."""
        accepted = {self.entry.cause, *self.entry.also}
        return next((f for f in self.findings if f.get("cause") in accepted), None)

    @property
    def detected(self) -> bool:
        return not self.entry.healthy and self.judged is not None

    @property
    def false_alarm(self) -> bool:
        return self.entry.healthy and bool(self.findings)

    @property
    def found_causes(self) -> list[str]:
        return [str(f.get("cause")) for f in self.findings]

    @property
    def found_name(self) -> str | None:
        finding = self.judged or (self.findings[0] if self.findings else None)
        culprit = (finding or {}).get("culprit") or {}
        return culprit.get("name")

    @property
    def found_line(self) -> str | None:
        finding = self.judged or (self.findings[0] if self.findings else None)
        culprit = (finding or {}).get("culprit") or {}
        if culprit.get("line") is None:
            return None
        return f"{Path(culprit.get('file') or '?').name}:{culprit['line']}"

    @property
    def culprit_ok(self) -> bool:
        finding = self.judged
        if finding is None:
            return False
        if not self.entry.culprit:
            return True
        name = (finding.get("culprit") or {}).get("name")
        return name_matches(name, self.entry.culprit)

    @property
    def line_ok(self) -> bool:
        finding = self.judged
        if finding is None:
            return False
        if not self.entry.line:
            return True
        culprit = finding.get("culprit") or {}
        file = culprit.get("file")
        if not file or Path(file).name != self.entry.script:
            return False
        line = culprit.get("line")
        return line in self.entry.line or any(
            line in statement_lines(self.entry.path, accepted) for accepted in self.entry.line)

    @property
    def passed(self) -> bool:
        if self.error is not None:
            return False
        if self.entry.healthy:
            return not self.findings
        return self.detected and self.culprit_ok and self.line_ok

    def describe(self) -> str:
        """A few lines for an assertion message."""
        lines = [f"{self.entry.script}: expected {self.entry.cause}"
                 + (f" (or {', '.join(self.entry.also)})" if self.entry.also else "")
                 + (f", culprit {list(self.entry.culprit)} line {list(self.entry.line)}"
                    if not self.entry.healthy else "")]
        if self.error:
            lines.append(f"  error: {self.error}")
        for f in self.findings:
            c = f.get("culprit") or {}
            lines.append(f"  found {f.get('cause')}: {c.get('name')} at "
                         f"{Path(c.get('file') or '?').name}:{c.get('line')} "
                         f"({f.get('bytes_per_step', 0):.0f} B/step)")
        for g in self.growth:
            lines.append(f"  growth {g.get('device')}: {g.get('verdict')} - {g.get('reason')}")
        if not self.findings:
            lines.append("  found nothing")
        tail = self.stderr.strip().splitlines()[-3:]
        if self.error and tail:
            lines += ["  stderr: " + t for t in tail]
        return "\n".join(lines)


#: how a path goes one hop deeper: an item, an attribute, a closure cell of a function
_HOPS = ("[", ".", ":")


def name_matches(name: str | None, accepted: Iterable[str]) -> bool:
    """Whether a culprit ``name`` is one of ``accepted`` or extends one by hops
    (``x[..]``, ``x.a``, ``f:cell``); an accepted ``self.a`` (an attribute of the instance
    a method runs on) also matches any path that reaches an instance and takes its
    attribute ``a`` (``model.act1._forward_hooks[3].a``)."""
    if not name:
        return False
    for want in accepted:
        if name == want or any(name.startswith(want + hop) for hop in _HOPS):
            return True
        if want.startswith("self.") and _ends_with_attribute(name, want[len("self"):]):
            return True
    return False


def _ends_with_attribute(name: str, attrs: str) -> bool:
    """Whether ``name`` takes the attributes ``attrs`` (``.a`` or ``.a.b``) of the object a
    longer path reaches, then ends or goes deeper by hops."""
    start = name.find(attrs, 1)
    while start > 0:
        rest = name[start + len(attrs):]
        if not rest or rest[0] in _HOPS:
            return True
        start = name.find(attrs, start + 1)
    return False


def load_manifest(path: Path = MANIFEST) -> list[Entry]:
    """Read the manifest: one :class:`Entry` per script, in file order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    entries = []
    for raw in data["scripts"]:
        entries.append(Entry(
            script=raw["script"], cause=raw["cause"],
            culprit=tuple(raw.get("culprit", ())), line=tuple(raw.get("line", ())),
            also=tuple(raw.get("also", ())), device=raw.get("device", "cpu"),
            doctor_args=tuple(raw.get("doctor_args", ())),
            script_args=tuple(raw.get("script_args", ())), what=raw.get("what", ""),
        ))
    return entries


def cuda_available() -> bool:
    """Whether a CUDA device is usable (asked in a subprocess-free, import-light way)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available())


def run_doctor(entry: Entry, *, timeout: float = 300.0, extra_args: Iterable[str] = ()) -> Result:
    """Run ``torchmem doctor`` on one corpus script through the CLI, in a subprocess."""
    result = Result(entry=entry)
    with tempfile.TemporaryDirectory(prefix="torchmem-corpus-") as tmp:
        capture_path = Path(tmp) / "capture.json"
        cmd = [sys.executable, "-m", "torchmem", "doctor", "--json", str(capture_path),
               *extra_args, *entry.doctor_args, str(entry.path), *entry.script_args]
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
        started = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            result.seconds = time.perf_counter() - started
            result.error = f"timed out after {timeout:.0f} s"
            return result
        result.seconds = time.perf_counter() - started
        result.returncode = proc.returncode
        result.stdout, result.stderr = proc.stdout, proc.stderr
        if proc.returncode != 0:
            result.error = f"exit code {proc.returncode}"
        if not capture_path.exists():
            result.error = result.error or "no capture written"
            return result
        try:
            capture = json.loads(capture_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            result.error = f"unreadable capture: {err}"
            return result
    result.capture = capture
    result.findings = list(capture.get("findings") or [])
    result.growth = list(capture.get("growth") or [])
    return result


def run_corpus(entries: Iterable[Entry], *, jobs: int = 2, timeout: float = 300.0,
               on_result: Callable[[Result], None] | None = None,
               verify: bool = False) -> list[Result]:
    """Run the doctor on ``entries`` with ``jobs`` scripts at a time; results in input order.

    ``verify`` makes the doctor prove its fixes by re-running each script edited
    (``--verify``); off by default (``--no-verify``): the diagnosis is what is judged here,
    and a re-run costs about one more run per script."""
    entries = list(entries)
    flag = ["--verify" if verify else "--no-verify"]

    def one(entry: Entry) -> Result:
        res = run_doctor(entry, timeout=timeout, extra_args=flag)
        if on_result is not None:
            on_result(res)
        return res

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, entries))
