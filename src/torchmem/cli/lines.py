"""``torchmem lines``: memory per line of a script, and where its largest storages come from.

Runs the script as ``python script.py`` would (its stdout untouched), profiles some of
its training steps exactly (:mod:`torchmem.doctor.line_probe`: within an overhead
budget, or every N-th step, or all), runs the doctor alongside, and prints on stderr the
lines of the script ranked by memory: the line that keeps a leak alive first, then the
bytes each line allocates per step, keeps alive at the step's end, adds per step and
holds at the peak; and the largest storages with the stack that made them and the path
that keeps them. ``--json FILE`` saves the capture (``torchmem report`` and ``torchmem
diff`` read it), ``--html FILE`` a page with an annotated source view. Exits with the
script's own exit code.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from torchmem.cli._output import ReportStream, check_outputs, output, script_inputs, write_text
from torchmem.cli._script_args import (
    add_target_arguments,
    check_target,
    parse_with_target,
    rank_path,
)
from torchmem.errors import UsageError

SUMMARY = "memory per line of a script: what each line allocates, keeps, and holds at the peak"


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] (script.py | -m module) [script args...]",
        description="Run a Python script as 'python script.py' would and attribute its "
                    "tensor memory to the lines of its code: bytes allocated per step, alive "
                    "at the step's end, added per step, share of the peak; the line that "
                    "keeps a leak alive first; and where the largest storages were made.",
        epilog="Options must come before the script; everything after it goes to the script. "
               "The report is written to stderr; the script's stdout is untouched.",
    )
    parser.add_argument("--steps", type=int, metavar="N",
                        help="stop the script cleanly after N training steps")
    sampling = parser.add_mutually_exclusive_group()
    sampling.add_argument("--budget", type=float, default=0.4, metavar="FRACTION",
                          help="profile steps while their overhead and the doctor's stay "
                               "within FRACTION of the plain run time (default: 0.4, which "
                               "keeps a long run within about 1.5x with the step hooks)")
    sampling.add_argument("--every", type=int, metavar="N",
                          help="profile every N-th step (and the first one)")
    sampling.add_argument("--all-steps", action="store_true",
                          help="profile every step (slowest, every figure exact)")
    parser.add_argument("--all-files", action="store_true",
                        help="attribute to library lines too (torch, installed packages), "
                             "not only to the script's own files")
    parser.add_argument("--top", type=int, default=15, metavar="N",
                        help="lines shown in the table (default: 15; --json keeps all)")
    parser.add_argument("--json", metavar="FILE",
                        help="write the capture as JSON (per rank under torchrun, as doctor)")
    parser.add_argument("--html", metavar="FILE",
                        help="write a self-contained HTML report with the annotated source")
    parser.add_argument("--interval", type=float, default=0.05, metavar="SECONDS",
                        help="background sampling interval for the timeline (default: 0.05; "
                             "0 disables it)")
    parser.add_argument("--quiet", action="store_true", help="print no report")
    add_target_arguments(parser)
    return parser


def _check(args: argparse.Namespace) -> None:
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1; got {args.steps}")
    if args.every is not None and args.every < 1:
        raise UsageError(f"--every must be at least 1; got {args.every}")
    if not 0 <= args.budget <= 100:
        raise UsageError(f"--budget must be a fraction between 0 and 100; got {args.budget}")
    if args.top < 1:
        raise UsageError(f"--top must be at least 1; got {args.top}")
    if args.interval < 0:
        raise UsageError(f"--interval must be >= 0 seconds; got {args.interval}")


def main(argv: Sequence[str], prog: str = "torchmem lines") -> int:
    """Run ``torchmem lines`` with ``argv``; return the script's exit code."""
    parser = build_parser(prog)
    args, target = parse_with_target(parser, argv)
    _check(args)
    check_target(target)
    json_out = output("--json", args.json, rank_path)
    html_out = output("--html", args.html, rank_path)
    check_outputs([json_out, html_out], script_inputs(target.path, target.args))
    stream = ReportStream()

    from torchmem.cli.run import save_capture
    from torchmem.doctor._summary import census_summary
    from torchmem.doctor.line_probe import LinesProbe
    from torchmem.doctor.probe import DoctorProbe
    from torchmem.doctor.runner import run_script

    doctor = DoctorProbe()
    doctor.peaks.walk = False  # the lines' own census sites name the holders
    probe = LinesProbe(doctor, all_files=args.all_files, every=args.every,
                       budget=None if args.all_steps else args.budget)
    result = run_script(target, [probe], max_steps=args.steps,
                        monitor_interval=args.interval or None, keep_namespace=True,
                        handle_sigterm=True)
    top, roles, modules = census_summary(doctor.census)
    notes = list(doctor.notes) + [g.reason for g in doctor.growth if g.verdict == "undecided"]
    capture = result.to_capture("torchmem lines", findings=doctor.findings,
                                growth=doctor.growth, top_storages=top, bytes_by_role=roles,
                                bytes_by_module=modules, notes=notes)
    capture = probe.fill(capture, doctor.findings, len(result.steps))
    if not args.quiet:
        _render(capture, stream, args.top)
    code = save_capture(capture, json_out, result.exit_code, prog, stream)
    if html_out is not None:
        from torchmem.report.html import render_html

        try:
            write_text(html_out.path, render_html(capture))
        except (OSError, ValueError) as err:
            stream.say(f"{prog}: error: cannot write {html_out.shown}: "
                       f"{getattr(err, 'strerror', None) or err}")
            return code or 2
        stream.say(f"HTML report written to {html_out.shown}")
    return code


def _render(capture: Any, stream: ReportStream, top: int) -> None:
    from torchmem.report.lines import render_lines

    try:
        render_lines(capture, file=stream.get(), top=top)
    except Exception:  # noqa: BLE001 - e.g. stderr is a closed pipe
        pass
