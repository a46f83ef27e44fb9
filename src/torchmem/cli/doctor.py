"""``torchmem doctor``: run a script, find why memory grows, name the culprit and the fix.

Runs the script as ``python script.py`` would (its stdout untouched), watches memory at
every training step, analyses the script's variables at a few step boundaries, and
prints a report on stderr: the growth verdict per device and the findings, ranked by
bytes, each with its culprit (``file:line``), the proof and the fix. ``--json FILE``
saves the capture (``torchmem report`` renders it again later); ``--html FILE`` writes
one self-contained page. The report says who holds the largest storages at the peak, at
an out-of-memory error and at the end; ``--lines`` adds the lines that allocated them.
Exits with the script's own exit code (143 after SIGTERM, which stops the script cleanly
and still writes the report and the files).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Sequence

from torchmem.cli._output import ReportStream, check_outputs, output, script_inputs, write_text
from torchmem.cli._script_args import (
    add_target_arguments,
    check_target,
    parse_with_target,
    rank_path,
)
from torchmem.errors import UsageError

SUMMARY = "run a script, find why memory grows, name the culprit and the fix"


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] (script.py | -m module) [script args...]",
        description="Run a Python training script as 'python script.py' would, find why its "
                    "memory grows, and name the culprit (variable, file:line), the proof and "
                    "the fix.",
        epilog="Options must come before the script; everything after it goes to the script. "
               "The report is written to stderr; the script's stdout is untouched.",
    )
    parser.add_argument("--steps", type=int, metavar="N",
                        help="stop the script cleanly after N training steps")
    parser.add_argument("--json", metavar="FILE",
                        help="write the capture as JSON (render it later with 'torchmem report'; "
                        "under torchrun, one file per rank: FILE.rank<N>.json, or put {rank} "
                        "in FILE)")
    parser.add_argument("--html", metavar="FILE",
                        help="write a self-contained HTML report (per rank, as --json)")
    parser.add_argument("--interval", type=float, default=0.05, metavar="SECONDS",
                        help="background sampling interval for the timeline (default: 0.05; "
                             "0 disables it)")
    parser.add_argument("--growth-only", action="store_true",
                        help="only the per-step growth verdict: no analysis of the script's "
                             "variables (cheapest)")
    parser.add_argument("--quiet", action="store_true", help="print no report")
    parser.add_argument("--lines", action="store_true",
                        help="attribute memory to source lines too (the engine of 'torchmem "
                             "lines', within its default overhead budget): adds the top "
                             "lines and the line that made each of the largest storages")
    parser.add_argument("--live", action="store_true",
                        help="show a live panel on stderr while the script runs: memory per "
                             "device, growth, phase, top holders of the last census (off when "
                             "stderr is not a terminal)")
    parser.add_argument("--rank-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="under torchrun: how long rank 0 waits for the other ranks' "
                             "captures to print one report for every rank (default: 60; "
                             "0: no merged report)")
    verify = parser.add_mutually_exclusive_group()
    verify.add_argument("--verify", dest="verify", action="store_true", default=None,
                        help="prove each fix that is an edit: re-run the script with the edit "
                             "applied and compare growth and exit code (default: on when the "
                             "run took at most 60 s; each re-run costs about one more run)")
    verify.add_argument("--no-verify", dest="verify", action="store_false",
                        help="do not re-run the script to prove the fixes")
    parser.add_argument("--edited-source", metavar="FILE", help=argparse.SUPPRESS)
    add_target_arguments(parser)
    return parser


def _live_holders(probe: Any) -> tuple[int, list[tuple[str, str, int]]] | None:
    """The live panel's top holders: the doctor's most recent census (never a new one)."""
    census, step = probe.census, probe.census_step
    if census is None or step is None:
        return None
    return step, [(e.name or f"{e.dtype} {tuple(e.shapes[0]) if e.shapes else ()}", e.role,
                   e.nbytes) for e in census.top(3)]


def _live_phase(probe: Any, step: int) -> str:
    """The live panel's words on the doctor's analysis schedule at ``step``."""
    from torchmem.doctor.probe import analysis_steps

    if not probe.deep:
        return "doctor: growth verdict only (--growth-only)"
    if step >= 2 and analysis_steps(step):
        return f"doctor: deep analysis at step {step}"
    upcoming = next(s for s in range(max(step + 1, 2), 4 * step + 8) if analysis_steps(s))
    return f"doctor: next deep analysis at step {upcoming}"


def _verified(probe: Any, result: Any, target: Any, args: argparse.Namespace,
              stream: ReportStream, prog: str) -> list[Any]:
    """The findings, each fix that is an edit proven by a re-run when verification is on
    (see :mod:`torchmem.doctor.verify`); the script's own run is over and untouched."""
    from torchmem.doctor.verify import Original, should_verify, verify_findings

    findings = list(probe.findings)
    if not any(f.edit is not None for f in findings) or \
            not should_verify(args.verify, result.duration_s, probe.deep) or \
            result.outcome in ("interrupt", "terminated"):
        return findings
    original = Original(target=target, script_file=_script_file(target),
                        exit_code=result.exit_code, error=result.error, growth=probe.growth,
                        steps=len(result.steps), max_steps=args.steps,
                        duration_s=result.duration_s)
    say = (lambda msg: None) if args.quiet else (lambda msg: stream.say(f"{prog}: {msg}"))
    return verify_findings(findings, original, say)


def _script_file(target: Any) -> str:
    """The file whose source ran as the script."""
    import os

    from torchmem.doctor.target import load_target

    if target.path is not None:
        path = os.path.abspath(target.path)
        return os.path.join(path, "__main__.py") if os.path.isdir(path) else path
    try:
        return load_target(target).filename
    except Exception:  # noqa: BLE001 - the module cannot be found again: nothing to verify
        return ""


def main(argv: Sequence[str], prog: str = "torchmem doctor") -> int:
    """Run ``torchmem doctor`` with ``argv``; return the script's exit code."""
    parser = build_parser(prog)
    args, target = parse_with_target(parser, argv)
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be at least 1; got {args.steps}")
    if args.interval < 0:
        raise UsageError(f"--interval must be >= 0 seconds; got {args.interval}")
    if not args.rank_timeout >= 0:
        raise UsageError(f"--rank-timeout must be >= 0 seconds; got {args.rank_timeout}")
    render_html: Any = None
    if args.html:
        try:
            from torchmem.report import html as _html

            render_html = _html.render_html
        except ImportError:
            raise UsageError("--html needs torchmem's HTML report, which this installation "
                             "lacks; expected torchmem.report.html",
                             tip="use --json FILE and 'torchmem report FILE --html OUT'") from None

    if args.edited_source is not None:
        target.source_file = args.edited_source
    check_target(target)
    json_out = output("--json", args.json, rank_path)
    html_out = output("--html", args.html, rank_path)
    check_outputs([json_out, html_out], script_inputs(target.path, target.args))
    from torchmem.cli._rank_report import RankMerge

    merge = RankMerge.prepare(args.json, args.html, args.rank_timeout)
    stream = ReportStream()
    from torchmem.cli.run import live_probes, render_report, save_capture
    from torchmem.doctor.probe import DoctorProbe
    from torchmem.doctor.runner import run_script

    probe = DoctorProbe(deep=not args.growth_only, census_at_end=not args.growth_only)
    lines: Any = None
    if args.lines:
        from torchmem.doctor.line_probe import LinesProbe

        lines = LinesProbe(probe)
    live = live_probes(args.live, stream, f"{prog}: {target.display}", prog,
                       holders=lambda: _live_holders(probe), phase=lambda n: _live_phase(probe, n))
    try:
        result = run_script(target, [*live, lines or probe], max_steps=args.steps,
                            monitor_interval=args.interval or None, keep_namespace=True,
                            handle_sigterm=True)
    finally:
        for view in live:
            view.close()
    from torchmem.doctor._summary import census_summary

    top, roles, modules = census_summary(probe.census)
    notes = list(probe.notes) + [g.reason for g in probe.growth if g.verdict == "undecided"]
    findings = _verified(probe, result, target, args, stream, prog)
    capture = result.to_capture("torchmem doctor", findings=findings, growth=probe.growth,
                                top_storages=top, bytes_by_role=roles,
                                bytes_by_module=modules, notes=notes)
    capture = dataclasses.replace(capture, holders=probe.holders())
    if lines is not None:
        capture = lines.fill(capture, findings, len(result.steps))
    if not args.quiet:
        render_report(capture, stream)
    code = save_capture(capture, json_out, result.exit_code, prog, stream)
    if html_out is not None:
        try:
            write_text(html_out.path, render_html(capture))
        except (OSError, ValueError) as err:
            stream.say(f"{prog}: error: cannot write {html_out.shown}: "
                       f"{getattr(err, 'strerror', None) or err}")
            code = code or 2
        else:
            stream.say(f"HTML report written to {html_out.shown}")
    merge.finish(capture, source=json_out.shown if json_out else "rank 0", quiet=args.quiet,
                 stream=stream, prog=prog)
    return code
