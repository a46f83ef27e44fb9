"""``torchmem run``: run a script under a memory monitor.

Prints, on stderr so that the script's own stdout is untouched: the peak per device, a
per-step table (first and last steps, growth per step), and a sparkline of the sampled
timeline. ``--json FILE`` writes the same data as a versioned capture that ``torchmem
report`` renders again later. Exits with the script's own exit code (143 after SIGTERM,
which stops the script cleanly and still writes the report and the capture).
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from torchmem.cli._output import (
    Output,
    ReportStream,
    capture_json,
    check_outputs,
    output,
    script_inputs,
    write_text,
)
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
    parser.add_argument("--live", action="store_true",
                        help="show a live panel on stderr while the script runs: memory per "
                             "device, growth, phase (off when stderr is not a terminal)")
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
    json_out = output("--json", args.json, rank_path)
    check_outputs([json_out], script_inputs(target.path, target.args))
    stream = ReportStream()

    from torchmem.doctor.runner import run_script

    live = live_probes(args.live, stream, f"{prog}: {target.display}", prog)
    try:
        result = run_script(target, live, max_steps=args.steps,
                            monitor_interval=args.interval or None, keep_namespace=True,
                            handle_sigterm=True)
    finally:
        for probe in live:
            probe.close()
    capture = result.to_capture("torchmem run")
    if not args.quiet:
        render_report(capture, stream)
    return save_capture(capture, json_out, result.exit_code, prog, stream)


def live_probes(enabled: bool, stream: ReportStream, title: str, prog: str,
                **kwargs: Any) -> list[Any]:
    """The ``--live`` panel's probe, or none: when not asked for, or when stderr is not a
    terminal (then one note line says so)."""
    if not enabled:
        return []
    from torchmem.report.live import LiveProbe, live_refusal

    refusal = live_refusal(stream.get())
    if refusal is not None:
        stream.say(f"{prog}: note: --live is off: {refusal}")
        return []
    return [LiveProbe(stream.get(), title, **kwargs)]


def render_report(capture: "Capture", stream: ReportStream) -> None:
    """Print the text report on ``stream``; a broken stderr never changes the exit code."""
    from torchmem.report.terminal import render_capture

    try:
        render_capture(capture, file=stream.get())
    except Exception:  # noqa: BLE001 - e.g. stderr is a closed pipe
        pass


def save_capture(capture: "Capture", out: Output | None, exit_code: int, prog: str,
                 stream: ReportStream) -> int:
    """Write ``capture`` to ``out`` if given; a failed write is one line, never a traceback.

    Returns the exit code to use: the script's, or 2 when the script succeeded but the
    capture could not be written.
    """
    if out is None:
        return exit_code
    try:
        write_text(out.path, capture_json(capture))
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or err
        stream.say(f"{prog}: error: cannot write {out.shown}: {reason}")
        return exit_code or 2
    stream.say(f"capture written to {out.shown}")
    return exit_code
