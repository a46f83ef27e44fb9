"""The ``torchmem`` command: a thin dispatcher over one module per subcommand.

Each subcommand module exposes ``main(argv: list[str], prog: str) -> int`` and a
one-line ``SUMMARY``. Modules are imported only when their subcommand runs, so
``torchmem lint`` never imports torch.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from torchmem import __version__
from torchmem.errors import TorchmemError

__all__ = ["main", "entry", "SUBCOMMANDS"]

#: subcommand -> (module, one-line summary shown by ``torchmem --help``)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("torchmem.cli.doctor", "run a script, find why memory grows, name the culprit and the fix"),
    "run": ("torchmem.cli.run", "run a script under a memory monitor: peak, per-step table, timeline"),
    "lines": ("torchmem.cli.lines", "memory per line of a script: what each line allocates, "
                                    "keeps, and holds at the peak"),
    "report": ("torchmem.cli.report", "render a saved JSON capture as text, HTML or JSON"),
    "diff": ("torchmem.cli.diff", "compare two captures: peak, growth, roles, modules, lines, "
                                  "and what explains the difference"),
    "lint": ("torchmem.cli.lint", "static linter for PyTorch memory anti-patterns (TMM rules)"),
}


def _usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [
        "usage: torchmem <command> [options] ...",
        "",
        "Find, explain and fix PyTorch memory problems.",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, summary) in SUBCOMMANDS.items()]
    lines += [
        "",
        "options:",
        "  -h, --help     show this message",
        "  --version      show the version",
        "",
        "Run 'torchmem <command> --help' for a command's options.",
    ]
    return "\n".join(lines)


def print_error(err: TorchmemError, prog: str = "torchmem") -> None:
    """Print a torchmem error as one line (plus an optional tip line) on stderr."""
    print(f"{prog}: error: {err.message}", file=sys.stderr)
    if err.tip:
        print(f"Tip: {err.tip}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the torchmem CLI and return its exit code (never raises for user errors)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"torchmem {__version__}")
        return 0
    name = args[0]
    if name not in SUBCOMMANDS:
        print(f"torchmem: error: unknown command {name!r}; expected one of "
              f"{', '.join(SUBCOMMANDS)}", file=sys.stderr)
        print("Tip: run 'torchmem --help'.", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    prog = f"torchmem {name}"
    try:
        return int(module.main(args[1:], prog=prog))
    except TorchmemError as err:
        print_error(err, prog)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `torchmem lint . | head`
        return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
