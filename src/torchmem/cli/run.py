"""``torchmem run``: run a script under a memory monitor.

Prints, on stderr so that the script's own stdout is untouched: the peak per device, a
per-step table (first and last steps, growth per step), and a sparkline of the sampled
timeline. ``--json FILE`` writes the same data as a versioned capture that ``torchmem
report`` renders again later. Exits with the script's own exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from torchmem.cli._script_args import (
    add_target_arguments,
    check_target,
    parse_with_target,
    rank_path,
)
from torchmem.errors import UsageError
from torchmem.model.capture import Capture

SUMMARY = "run a script under a memory monitor: peak, per-step table, timeline"


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] (script.py | -m module) [script args...]",
        description="Run a Python script as 'python script.py' would, under a memory "
                    "monitor, and print peak memory, a per-step table and a timeline.",
        epilog="Options must come before the script; everything after it goes to the script.",
    )
    parser.add_argument("--json", metavar="FILE",
                        help="write the run's capture as JSON (under torchrun, one file per "
                        "rank: FILE.rank<N>.json, or put {rank} in FILE)")
    parser.add_argument("--steps", type=int, metavar="N",
                        help="stop the script cleanly after N training steps")
    parser.add_argument("--interval", type=float, default=0.05, metavar="SECONDS",
                        help="background sampling interval (default: 0.05; 0 disables it)")
    parser.add_argument("--quiet", action="store_true", help="print no summary")
    add_target_arguments(parser)
    return parser


def main(argv: Sequence[str], prog: str = "torchmem run") -> int:
    parser = build_parser(prog)
    args, target = parse_with_target(parser, argv)
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1; got {args.steps}")
    if args.interval < 0:
        raise UsageError(f"--interval must be >= 0 seconds; got {args.interval}")
    check_target(target)

    from torchmem.doctor.runner import run_script

    result = run_script(target, max_steps=args.steps, monitor_interval=args.interval or None)
    capture = result.to_capture("torchmem run")
    if not args.quiet:
        from torchmem.report.terminal import render_capture

        render_capture(capture, file=sys.stderr)
    return save_capture(capture, args.json, result.exit_code, prog)


def save_capture(capture: "Capture", path: str | None, exit_code: int, prog: str) -> int:
    """Write ``capture`` to ``path`` if given; a failed write is one line, never a traceback.

    Returns the exit code to use: the script's, or 2 when the script succeeded but the
    capture could not be written.
    """
    if not path:
        return exit_code
    path = rank_path(path)
    try:
        capture.save(path)
    except OSError as err:
        print(f"{prog}: error: cannot write {path}: {err.strerror or err}", file=sys.stderr)
        return exit_code or 2
    print(f"capture written to {path}", file=sys.stderr)
    return exit_code
