"""``torchmem lint PATH...``: static checks for PyTorch memory anti-patterns.

Exit codes: 0 nothing found, 1 violations (or files that could not be linted), 2 usage
or configuration error. Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from torchmem.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from torchmem.lint.config import LintConfig
    from torchmem.lint.files import LintResult

__all__ = ["SUMMARY", "build_parser", "main"]

SUMMARY = "static linter for PyTorch memory anti-patterns (TMM rules)"

_EPILOG = """\
examples:
  torchmem lint .                          lint a project (respects .gitignore)
  torchmem lint train.py --select TMM1     only the graph-retention family
  torchmem lint src --extend-select TMM9   add the opinionated rules
  torchmem lint . --diff                   show what --fix would change
  torchmem lint . --fix --unsafe-fixes     apply every fix
  torchmem lint --explain TMM101           what a rule finds and why
  cat x.py | torchmem lint - --stdin-filename x.py

configuration: [tool.torchmem.lint] in pyproject.toml (select, extend-select, ignore,
exclude, per-file-ignores, respect-gitignore); silence one line with '# noqa: TMM101'.
exit codes: 0 clean, 1 something found, 2 usage error."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}", tip=f"run '{self.prog} --help'")


def _codes(value: str) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def build_parser(prog: str = "torchmem lint") -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    p = _Parser(prog=prog, description="Find PyTorch memory mistakes before the code runs.",
                epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files or directories to lint (default: .); '-' reads stdin")
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", type=_codes, action="extend", metavar="CODES",
                     help="comma-separated codes/prefixes to enable instead of the defaults "
                          "(ALL: every rule)")
    sel.add_argument("--extend-select", type=_codes, action="extend", default=[],
                     metavar="CODES", help="codes/prefixes to enable on top of the selection")
    sel.add_argument("--ignore", type=_codes, action="extend", default=[], metavar="CODES",
                     help="codes/prefixes to disable")
    files = p.add_argument_group("files and configuration")
    files.add_argument("--exclude", type=_codes, action="extend", default=[], metavar="GLOBS",
                       help="comma-separated globs to skip, added to the configured ones")
    files.add_argument("--no-respect-gitignore", action="store_true",
                       help="also lint files that .gitignore ignores")
    files.add_argument("--config", metavar="FILE", help="read settings from this pyproject.toml")
    files.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    files.add_argument("--stdin-filename", metavar="PATH",
                       help="the name of the file read from stdin (for messages, config)")
    files.add_argument("-j", "--jobs", type=int, metavar="N",
                       help="worker processes (default: one per core; small inputs run "
                            "in-process)")
    out = p.add_argument_group("output")
    out.add_argument("--format", "--output-format", dest="format", default="text",
                     choices=("text", "json", "sarif"), help="output format (default: text)")
    out.add_argument("-o", "--output-file", metavar="FILE", help="write the report here")
    out.add_argument("--statistics", action="store_true",
                     help="print counts per rule instead of each violation")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                     help="ANSI colors (auto: only on a terminal, honours NO_COLOR)")
    out.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    out.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when violations are found")
    out.add_argument("--explain", metavar="CODE",
                     help="print a rule's documentation (ALL: list the rules) and exit")
    fix = p.add_argument_group("fixes")
    fix.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fix.add_argument("--unsafe-fixes", action="store_true",
                     help="with --fix or --diff, apply unsafe fixes too")
    fix.add_argument("--diff", action="store_true",
                     help="print the fixes as a unified diff; change no file")
    return p


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def _write(text: str, stream: TextIO) -> None:
    if text:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()


def _lint_stdin(args: argparse.Namespace, config: LintConfig) -> tuple[LintResult, str | None]:
    from torchmem.lint.files import LintResult, _Options, lint_bytes
    from torchmem.lint.registry import select_rules

    path = args.stdin_filename or "-"
    eff = config.effective_select()
    select_rules(eff, config.ignore)
    opts = _Options(select=tuple(eff) if eff is not None else None, ignore=config.ignore,
                    fix=args.fix and not args.diff, unsafe_fixes=args.unsafe_fixes,
                    diff=args.diff, write=False)
    data = sys.stdin.buffer.read()
    report, source = lint_bytes(data, path, opts, config.ignored_for(path))
    result = LintResult(violations=tuple(report.violations), errors=tuple(report.errors),
                        files=1, lines=report.lines, fixed=report.fixed,
                        fixed_files=(path,) if report.fixed else (),
                        diffs=(report.diff,) if report.diff else ())
    fixed_text = None
    if args.fix and not args.diff:  # like ruff: the (possibly unchanged) source to stdout
        fixed_text = report.fixed_text if report.fixed_text is not None else (
            source.text if source is not None else data.decode("utf-8", "replace"))
    return result, fixed_text


def main(argv: Sequence[str] | None = None, prog: str = "torchmem lint") -> int:
    """Run ``torchmem lint`` and return its exit code.

    Raises:
        UsageError: bad options, unknown rule codes, or a bad configuration file (the
            dispatcher turns it into one line on stderr and exit code 2).
    """
    args = build_parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.explain:
        from torchmem.lint import formats

        text = (formats.format_rule_list() if args.explain.upper() == "ALL"
                else formats.format_explain(args.explain))
        _write(text, sys.stdout)
        return 0
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1; got {args.jobs}")
    if args.unsafe_fixes and not (args.fix or args.diff):
        raise UsageError("--unsafe-fixes does nothing alone; expected it with --fix or --diff")

    from torchmem.lint.config import load_config
    from torchmem.lint.files import lint_paths

    paths = args.paths or ["."]
    stdin = paths == ["-"]
    if "-" in paths and not stdin:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    start = (args.stdin_filename or ".") if stdin else paths[0]
    config = load_config(start, config_file=args.config, isolated=args.isolated).merged(
        select=args.select, extend_select=args.extend_select, ignore=args.ignore,
        exclude=args.exclude, respect_gitignore=False if args.no_respect_gitignore else None)

    out: TextIO = sys.stdout
    handle = None
    if args.output_file:  # before linting: a bad path must not cost a run (or a --fix)
        try:
            handle = open(args.output_file, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"--output-file: cannot write {args.output_file!r}; "
                             f"{exc.strerror or exc}") from None
        out = handle

    fixed_text: str | None = None
    result: LintResult
    try:
        if stdin:
            result, fixed_text = _lint_stdin(args, config)
        else:
            result = lint_paths(paths, config=config, jobs=args.jobs, fix=args.fix,
                                unsafe_fixes=args.unsafe_fixes, diff=args.diff)
    except BaseException as exc:
        if handle is not None:
            handle.close()
        from torchmem.lint.workers import Terminated

        if isinstance(exc, Terminated):  # SIGTERM: the workers are already stopped
            sys.stderr.write(f"{prog}: terminated\n")
            return exc.exit_code
        raise

    if not stdin and result.files == 0 and not result.errors:
        sys.stderr.write(f"{prog}: warning: no Python files found under "
                         f"{', '.join(paths)}\n")
    try:
        code = _render(args, result, out, fixed_text)
    finally:
        if handle is not None:
            handle.close()
    return 0 if args.exit_zero and code == 1 else code


def _render(args: argparse.Namespace, result: LintResult, out: TextIO,
            fixed_text: str | None) -> int:
    from torchmem.lint import formats

    found = 1 if result.found else 0
    if fixed_text is not None:  # stdin --fix: the fixed source goes to stdout
        sys.stdout.write(fixed_text)
        sys.stdout.flush()
        items = sorted([*result.violations, *result.errors], key=lambda v: v.sort_key())
        _write("\n".join(formats.format_violation(v) for v in items), sys.stderr)
        return found
    if args.diff:
        _write("".join(result.diffs), out)
        # files that could not be linted are named on stderr (the diff stays applicable)
        _write("\n".join(formats.format_violation(v) for v in result.errors), sys.stderr)
        if not args.quiet:
            n = result.fixed
            msg = (f"Would fix {n} violation{'s' if n != 1 else ''} in "
                   f"{len(result.fixed_files)} file{'s' if len(result.fixed_files) != 1 else ''}."
                   if n else "No fixes available.")
            _write(msg, sys.stderr)
        return 1 if result.fixed or result.errors else 0
    if args.format == "json":
        _write(formats.format_json(result), out)
        return found
    if args.format == "sarif":
        _write(formats.format_sarif(result), out)
        return found
    color = _use_color(args.color, out)
    if args.statistics:
        _write(formats.format_statistics([*result.violations, *result.errors],
                                          unsafe=args.unsafe_fixes), out)
        if not args.quiet and not result.found:
            _write(formats.format_text(result, color=color), out)
        return found
    text = formats.format_text(result, color=color, fix_mode=args.fix)
    if args.quiet:
        text = "\n".join(formats.format_violation(v, color=color) for v in
                         sorted([*result.violations, *result.errors], key=lambda v: v.sort_key()))
    _write(text, out)
    return found
