"""Lint files and directories: read, decode, lint, fix, in parallel; never a traceback.

:func:`lint_paths` is the library entry point behind ``torchmem lint``. Files that cannot
be linted get a per-file diagnostic and the others are still linted:

- ``E902`` (io-error): missing path, unreadable file, binary file (NUL bytes), bytes
  that are not valid in the file's encoding (UTF-8 unless a PEP 263 coding cookie or a
  BOM says otherwise; a cookie naming a codec Python does not know, such as one a package
  registers at run time, is read as UTF-8 when the bytes are valid UTF-8);
- ``E999`` (syntax-error): the file is not valid Python;
- ``TMM000`` (internal-error): the linter itself failed on this file (a bug to report).

Example:
    >>> from torchmem.lint import lint_paths
    >>> result = lint_paths(["train.py"])  # doctest: +SKIP
    >>> [(v.path, v.line, v.code) for v in result.violations]  # doctest: +SKIP
    [('train.py', 12, 'TMM101')]

Jupyter notebooks (``*.ipynb``) are linted cell by cell, see :mod:`torchmem.lint.notebook`.

Known limitations:
    Only ``*.py`` and ``*.ipynb`` files are collected from directories (no stubs).
"""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from torchmem.lint.config import LintConfig, load_config
from torchmem.lint.discover import discover, io_error
from torchmem.lint.violation import LintSyntaxError, Violation
from torchmem.model._serde import Record

__all__ = [
    "FileReport",
    "LintResult",
    "SourceFile",
    "decode_source",
    "default_jobs",
    "lint_bytes",
    "lint_paths",
]

#: inputs smaller than this many bytes are linted in-process (a pool costs more)
PARALLEL_MIN_BYTES = 200_000


@dataclass(frozen=True)
class SourceFile:
    """Decoded source plus what is needed to write it back unchanged in form.

    Attributes:
        text: the decoded text, line endings as in the file.
        encoding: the codec used (``"utf-8-sig"`` when the file starts with a BOM).
    """

    text: str
    encoding: str


def decode_source(data: bytes, path: str) -> SourceFile | Violation:
    """Decode a Python file's bytes, honouring a BOM and a PEP 263 coding cookie.

    Returns:
        The :class:`SourceFile`, or an ``E902`` diagnostic explaining why not.
    """
    if b"\0" in data:
        return io_error(path, "binary file (contains NUL bytes); expected Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        try:  # no usable cookie: tokenize reports bad UTF-8 in the first lines this way
            text = data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            why = f"{exc.msg}; " if exc.msg.startswith("unknown encoding") else ""
            return io_error(path, f"{why}not valid utf-8 at byte {bad.start} (line {line}); "
                                  "expected UTF-8 text or a PEP 263 coding cookie naming "
                                  "the file's encoding")
        if exc.msg.startswith("unknown encoding"):
            # a codec registered at run time (``future_fstrings``) over UTF-8 text
            return SourceFile(text=text, encoding="utf-8")
        return io_error(path, f"cannot decode: {exc.msg}; expected UTF-8 or a valid "
                              "PEP 263 coding cookie")
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
        return io_error(path, f"not valid {encoding}{where}; expected UTF-8 text or a "
                              "PEP 263 coding cookie naming the file's encoding")
    return SourceFile(text=text, encoding=encoding)


@dataclass(frozen=True)
class FileReport:
    """The outcome for one file (internal; aggregated into :class:`LintResult`)."""

    path: str
    lines: int = 0
    violations: list[Violation] = field(default_factory=list)
    errors: list[Violation] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""
    fixed_text: str | None = None


@dataclass(frozen=True)
class LintResult(Record):
    """Everything a lint run found.

    Attributes:
        violations: rule violations, ordered by path, line, column, code (after fixing:
            the ones that remain).
        errors: per-file diagnostics (``E902``, ``E999``, ``TMM000``) for files that could
            not be linted.
        files: number of files linted or attempted.
        lines: number of source lines linted.
        fixed: number of fixes applied (or, with ``diff``, that would be applied).
        fixed_files: files changed (or that would change) by fixes.
        diffs: unified diffs of the would-be changes when ``diff=True``.
    """

    violations: tuple[Violation, ...] = ()
    errors: tuple[Violation, ...] = ()
    files: int = 0
    lines: int = 0
    fixed: int = 0
    fixed_files: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        """Whether anything was reported (violations or per-file errors)."""
        return bool(self.violations or self.errors)


@dataclass(frozen=True)
class _Options:
    select: tuple[str, ...] | None
    ignore: tuple[str, ...]
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    write: bool = True
    #: the files of a whole-tree run, for their calls of each other's functions
    tree_files: tuple[str, ...] = ()


def _count_lines(text: str) -> int:
    ends = text.count("\n") + text.count("\r") - text.count("\r\n")
    return ends + (1 if text and not text.endswith(("\n", "\r")) else 0)


def _syntax_error(path: str, exc: LintSyntaxError) -> Violation:
    message = exc.message
    for prefix in (f"{path}:{exc.line}:{exc.col + 1}: ", f"{path}: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            break
    return Violation(path=path, line=exc.line, col=exc.col, end_line=exc.line,
                     end_col=exc.col, code="E999", name="syntax-error", message=message)


def _lint_text(text: str, path: str, opts: _Options,
               extra_ignore: tuple[str, ...]) -> FileReport:
    from torchmem.lint.engine import lint_source

    ignore = opts.ignore + extra_ignore
    select = list(opts.select) if opts.select is not None else None

    def run(src: str) -> list[Violation]:
        return lint_source(src, path, select=select, ignore=list(ignore) or None,
                           tree_files=opts.tree_files)

    lines = _count_lines(text)
    try:
        if not (opts.fix or opts.diff):
            return FileReport(path, lines, sorted(run(text), key=Violation.sort_key))
        from torchmem.lint.fix import fix_source, unified_diff

        outcome = fix_source(text, run, unsafe=opts.unsafe_fixes)
    except LintSyntaxError as exc:
        return FileReport(path, lines, errors=[_syntax_error(path, exc)])
    except RecursionError:
        return FileReport(path, lines, errors=[Violation(
            path=path, line=1, col=0, end_line=1, end_col=0, code="E999",
            name="syntax-error", message="code nested too deeply to analyse")])
    except Exception as exc:  # a linter bug must not hide the other files' results
        return FileReport(path, lines, errors=[Violation(
            path=path, line=1, col=0, end_line=1, end_col=0, code="TMM000",
            name="internal-error",
            message=f"torchmem failed on this file ({type(exc).__name__}: {exc}); "
                    "please report it with the file")])
    remaining = sorted(outcome.violations, key=Violation.sort_key)
    if outcome.text == text:
        return FileReport(path, lines, remaining)
    diff = unified_diff(text, outcome.text, path) if opts.diff else ""
    return FileReport(path, lines, remaining, fixed=outcome.applied, diff=diff,
                      fixed_text=outcome.text)


def lint_bytes(data: bytes, path: str, opts: _Options,
               extra_ignore: tuple[str, ...] = ()) -> tuple[FileReport, SourceFile | None]:
    """Decode and lint one file's bytes (no writing). Internal; used by stdin mode too.

    A ``*.ipynb`` path is read as a Jupyter notebook (:mod:`torchmem.lint.notebook`).
    """
    if path.lower().endswith(".ipynb"):
        from torchmem.lint.notebook import lint_notebook

        return lint_notebook(data, path, opts, extra_ignore)
    source = decode_source(data, path)
    if isinstance(source, Violation):
        return FileReport(path, errors=[source]), None
    return _lint_text(source.text, path, opts, extra_ignore), source


def _lint_file(job: tuple[str, _Options, tuple[str, ...]]) -> FileReport:
    path, opts, extra_ignore = job
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except IsADirectoryError:
        return FileReport(path, errors=[io_error(path, "is a directory")])
    except OSError as exc:
        return FileReport(path, errors=[io_error(path, exc.strerror or str(exc))])
    report, source = lint_bytes(data, path, opts, extra_ignore)
    if opts.fix and opts.write and report.fixed_text is not None and source is not None:
        from torchmem.lint.workers import signals_deferred
        from torchmem.lint.writeback import write_back

        try:
            with signals_deferred():  # a kill lands before or after the write, not inside
                write_back(path, report.fixed_text.encode(source.encoding))
        except (OSError, UnicodeEncodeError, LookupError) as exc:
            why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            # nothing was fixed: report what the file still contains
            unfixed = _lint_text(source.text, path, replace(opts, fix=False), extra_ignore)
            return FileReport(path, unfixed.lines, unfixed.violations, [*unfixed.errors,
                              io_error(path, f"cannot write the fixed file: {why}")])
    return FileReport(path, report.lines, report.violations, report.errors, report.fixed,
                      report.diff)


def default_jobs() -> int:
    """CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _run(jobs_list: list[tuple[str, _Options, tuple[str, ...]]], jobs: int) -> list[FileReport]:
    if jobs <= 1 or len(jobs_list) < 2:
        return [_lint_file(j) for j in jobs_list]
    total = 0
    for path, _, _ in jobs_list:
        try:
            total += os.path.getsize(path)
        except OSError:
            pass
    if total < PARALLEL_MIN_BYTES:
        return [_lint_file(j) for j in jobs_list]
    from torchmem.lint.workers import map_in_workers  # only when it pays off

    workers = min(jobs, len(jobs_list))
    chunk = max(1, len(jobs_list) // (workers * 8))
    try:
        return map_in_workers(_lint_file, jobs_list, workers=workers, chunksize=chunk)
    except (OSError, RuntimeError, ImportError):  # no process support (sandbox, wasm...)
        return [_lint_file(j) for j in jobs_list]


def lint_paths(paths: Iterable[str] | str, *, select: Sequence[str] | None = None,
               ignore: Sequence[str] | None = None, config: LintConfig | None = None,
               jobs: int | None = None, fix: bool = False, unsafe_fixes: bool = False,
               diff: bool = False) -> LintResult:
    """Lint files and directories.

    Args:
        paths: files and directories (directories are walked, see
            :mod:`torchmem.lint.discover`).
        select: codes/prefixes to enable instead of the configured/default set.
        ignore: codes/prefixes to disable, on top of the configured ones.
        config: settings; when ``None`` they are read from the nearest ``pyproject.toml``
            above the first path (pass ``LintConfig()`` to ignore configuration files).
        jobs: worker processes; ``None`` means one per core. Small inputs are linted
            in-process whatever ``jobs`` says.
        fix: apply safe fixes and write the files (through symlinks and hard links,
            keeping their mode, encoding and line endings; see
            :mod:`torchmem.lint.writeback`).
        unsafe_fixes: with ``fix`` or ``diff``, apply unsafe fixes too.
        diff: compute the fixes' unified diffs without writing anything.

    Returns:
        A :class:`LintResult`.

    Raises:
        UsageError: an unknown rule code in ``select``/``ignore``/configuration.
    """
    from torchmem.lint.registry import resolve_codes, select_rules

    path_list = [paths] if isinstance(paths, str) else list(paths)
    if config is None:
        config = load_config(path_list[0] if path_list else ".")
    config = config.merged(select=select, ignore=ignore or ())
    eff_select = config.effective_select()
    select_rules(eff_select, config.ignore)  # validate codes once, up front
    for _, codes in config.per_file_ignores:
        resolve_codes(codes, what="per-file-ignores")
    opts = _Options(select=tuple(eff_select) if eff_select is not None else None,
                    ignore=tuple(config.ignore), fix=fix and not diff,
                    unsafe_fixes=unsafe_fixes, diff=diff)
    files, problems = discover(path_list, config)
    if len(files) > 1:  # a whole tree: the files' calls of each other's functions
        from torchmem.lint.tree_callers import forget_trees

        forget_trees()
        opts = replace(opts, tree_files=tuple(files))
    jobs_list = [(f, opts, config.ignored_for(f)) for f in files]
    reports = _run(jobs_list, jobs or default_jobs())
    violations = sorted((v for r in reports for v in r.violations), key=Violation.sort_key)
    errors = sorted([*problems, *(e for r in reports for e in r.errors)],
                    key=Violation.sort_key)
    return LintResult(
        violations=tuple(violations), errors=tuple(errors), files=len(files),
        lines=sum(r.lines for r in reports), fixed=sum(r.fixed for r in reports),
        fixed_files=tuple(r.path for r in reports if r.fixed),
        diffs=tuple(r.diff for r in reports if r.diff))

