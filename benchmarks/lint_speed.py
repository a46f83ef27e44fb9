"""How fast is ``torchmem lint``? Lines per second against TorchFix, ruff and bare ``ast``.

Every tool reads the same real Python files. Two kinds of timing:

- whole process: wall-clock time of the command line, start-up included
  (``torchmem lint``, ``ruff check --select ALL --no-cache``, ``torchfix``, and a
  ``python -c`` that only does ``ast.parse`` + ``ast.walk`` on every file);
- in-process: the files are read into memory first, then only the linting is timed
  (``lint_source`` on each text; ``ast.parse`` + ``ast.walk``; TorchFix's checker class).

Runs are interleaved (tool A, B, C, A, B, C, ...; the order rotates each round) so that
load from other processes on the machine hits every tool alike; the table shows the
median of ``--runs`` rounds. "1 core" rows are pinned with ``taskset -c 0`` when it
exists (and ruff gets ``RAYON_NUM_THREADS=1``). TorchFix is slow (about 1,000 lines/s),
so it runs on a subset (``--subset-lines``); torchmem and the ast floor are timed on the
same subset too, for a like-for-like ratio.

Usage:
    python benchmarks/lint_speed.py CORPUS_DIR [--runs 5] [--bench-python PY] [--ruff RUFF]

``--bench-python`` is an interpreter that has ``torchfix`` installed (it is not a torchmem
dependency), ``--ruff`` the ruff binary; rows whose tool is missing are skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

AST_WHOLE = """
import ast, sys
for p in sys.argv[1:]:
    with open(p, 'rb') as fh:
        data = fh.read()
    try:
        for _ in ast.walk(ast.parse(data)):
            pass
    except (SyntaxError, ValueError):
        pass
"""

INPROC = r"""
import sys, time, json
tool, listfile = sys.argv[1], sys.argv[2]
paths = open(listfile, encoding='utf-8').read().split('\0')
texts = []
for p in paths:
    with open(p, 'rb') as fh:
        data = fh.read()
    try:
        texts.append((p, data.decode('utf-8')))
    except UnicodeDecodeError:
        pass
if tool == 'torchmem':
    from torchmem.lint.engine import lint_source
    from torchmem.lint.violation import LintSyntaxError
    lint_source('x = 1\n')  # warm: rules registered, tables built
    def run():
        n = 0
        for p, t in texts:
            try:
                n += len(lint_source(t, p))
            except LintSyntaxError:
                pass
        return n
elif tool == 'torchmem-paths':
    from torchmem.lint.config import LintConfig
    from torchmem.lint.files import lint_paths
    from torchmem.lint.engine import lint_source
    lint_source('x = 1\n')
    jobs = int(sys.argv[3])
    def run():
        r = lint_paths(paths, config=LintConfig(respect_gitignore=False), jobs=jobs)
        return len(r.violations)
elif tool == 'ast':
    import ast
    def run():
        n = 0
        for p, t in texts:
            try:
                for _ in ast.walk(ast.parse(t)):
                    n += 1
            except SyntaxError:
                pass
        return n
elif tool == 'torchfix':
    from torchfix.torchfix import TorchChecker
    def run():
        n = 0
        for p, t in texts:
            try:
                n += len(list(TorchChecker(None, t.splitlines(keepends=True)).run()))
            except Exception:
                pass
        return n
import os
def cpu():
    a = os.times()
    return a.user + a.system + a.children_user + a.children_system
t0, c0 = time.perf_counter(), cpu()
found = run()
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": cpu() - c0, "found": found}))
"""


def count_lines(paths: list[str]) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as fh:
            total += fh.read().count(b"\n")
    return total


def collect(corpus: str) -> list[str]:
    sys.path.insert(0, str(SRC))
    from torchmem.lint.config import LintConfig
    from torchmem.lint.discover import discover

    files, _ = discover([corpus], LintConfig(respect_gitignore=False))
    return files


def pin(cmd: list[str], one_core: bool) -> list[str]:
    if one_core and shutil.which("taskset"):
        return ["taskset", "-c", "0", *cmd]
    return cmd


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    c0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                          check=False)
    elapsed = time.perf_counter() - t0
    cpu = _children_cpu() - c0
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[:4]}... failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed, cpu


def inproc(python: str, tool: str, listfile: str, one_core: bool, *extra: str,
           env: dict[str, str] | None = None) -> tuple[float, float]:
    import json

    cmd = pin([python, "-c", INPROC, tool, listfile, *extra], one_core)
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"in-process {tool} failed: {proc.stderr.decode()[-800:]}")
    doc = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return float(doc["seconds"]), float(doc["cpu"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", help="directory of real Python files")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bench-python", default=None,
                    help="a Python interpreter with torchfix installed")
    ap.add_argument("--ruff", default=shutil.which("ruff"), help="the ruff binary")
    ap.add_argument("--subset-lines", type=int, default=12_000,
                    help="lines in the subset that TorchFix (and the others) run on")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    files = collect(args.corpus)
    if not files:
        print(f"no Python files under {args.corpus}", file=sys.stderr)
        return 2
    subset, n = [], 0
    for f in sorted(files):
        if n >= args.subset_lines:
            break
        subset.append(f)
        n += count_lines([f])
    corpora = {"full": files, "subset": subset}
    lines = {k: count_lines(v) for k, v in corpora.items()}
    tmp = tempfile.mkdtemp(prefix="lintspeed-")
    lists = {}
    for k, v in corpora.items():
        lists[k] = os.path.join(tmp, f"{k}.lst")
        Path(lists[k]).write_text("\0".join(v), encoding="utf-8")

    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env1 = dict(env, RAYON_NUM_THREADS="1")
    py = sys.executable
    tm = [py, "-m", "torchmem", "lint", "--isolated", "--no-respect-gitignore", "-q",
          "--exit-zero"]
    cases: list[tuple[str, str, str, object]] = []  # (corpus, kind, label, thunk)

    def add(corpus: str, kind: str, label: str, fn: object) -> None:
        cases.append((corpus, kind, label, fn))

    for corpus in ("full", "subset"):
        fl, lst = corpora[corpus], lists[corpus]
        add(corpus, "process", "ast.parse+walk, 1 core",
            lambda fl=fl: timed(pin([py, "-c", AST_WHOLE, *fl], True)))
        add(corpus, "process", "torchmem lint, 1 core",
            lambda fl=fl: timed(pin([*tm, "-j", "1", *fl], True), env))
        add(corpus, "process", f"torchmem lint, {args.jobs} cores",
            lambda fl=fl: timed([*tm, "-j", str(args.jobs), *fl], env))
        if args.ruff:
            rf = [args.ruff, "check", "--select", "ALL", "--no-cache", "--isolated",
                  "--exit-zero", "-q"]
            add(corpus, "process", "ruff --select ALL, 1 core",
                lambda fl=fl, rf=rf: timed(pin([*rf, *fl], True), env1))
            add(corpus, "process", f"ruff --select ALL, {args.jobs} cores",
                lambda fl=fl, rf=rf: timed([*rf, *fl], env))
        add(corpus, "in-process", "ast.parse+walk, 1 core",
            lambda lst=lst: inproc(py, "ast", lst, True, env=env))
        add(corpus, "in-process", "torchmem lint_source, 1 core",
            lambda lst=lst: inproc(py, "torchmem", lst, True, env=env))
        add(corpus, "in-process", f"torchmem lint_paths, {args.jobs} cores",
            lambda lst=lst: inproc(py, "torchmem-paths", lst, False, str(args.jobs), env=env))
    if args.bench_python:
        bp = args.bench_python
        tf = str(Path(bp).parent / "torchfix")
        add("subset", "process", "TorchFix, 1 core",
            lambda: timed(pin([tf, "-j", "1", *subset], True)))
        add("subset", "in-process", "TorchFix checker, 1 core",
            lambda: inproc(bp, "torchfix", lists["subset"], True))

    results: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    cpus: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    for r in range(args.runs):
        order = list(range(len(cases)))
        k = r % len(order)
        order = order[k:] + order[:k]  # rotate: each tool goes first once in a while
        for i in order:
            wall, cpu = cases[i][3]()  # type: ignore[operator]
            results[i].append(wall)
            cpus[i].append(cpu)
        print(f"round {r + 1}/{args.runs} done", file=sys.stderr)

    print(f"corpus: {args.corpus}: {len(files)} files, {lines['full']:,} lines; "
          f"subset: {len(subset)} files, {lines['subset']:,} lines; "
          f"median of {args.runs} interleaved runs; python {sys.version.split()[0]}")
    for corpus in ("subset", "full"):
        base = {kind: statistics.median(results[i]) for i, (c, kind, label, _) in
                enumerate(cases) if c == corpus and label.startswith("ast.parse")}
        tfix = {kind: statistics.median(results[i]) for i, (c, kind, label, _) in
                enumerate(cases) if c == corpus and label.startswith("TorchFix")}
        print()
        print(f"## {corpus} ({lines[corpus]:,} lines)")
        print(f"| {'timing':<10} | {'tool':<32} | {'median s':>9} | {'lines/s':>10} | "
              f"{'vs ast floor':>12} | {'vs TorchFix':>11} | {'CPU s':>7} | "
              f"{'lines/CPU-s':>11} |")
        print(f"|{'-' * 12}|{'-' * 34}|{'-' * 11}:|{'-' * 11}:|{'-' * 13}:|{'-' * 12}:|"
              f"{'-' * 8}:|{'-' * 12}:|")
        for i, (c, kind, label, _) in enumerate(cases):
            if c != corpus:
                continue
            med = statistics.median(results[i])
            lps = lines[corpus] / med
            vs_ast = f"{base[kind] / med:.2f}x" if kind in base else "-"
            vs_tf = f"{tfix[kind] / med:.1f}x" if kind in tfix else "-"
            cpu = statistics.median(cpus[i])
            cps = f"{lines[corpus] / cpu:,.0f}" if cpu > 0 else "-"
            print(f"| {kind:<10} | {label:<32} | {med:>9.3f} | {lps:>10,.0f} | "
                  f"{vs_ast:>12} | {vs_tf:>11} | {cpu:>7.2f} | {cps:>11} |")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
