"""``torchmem diff``: compare two runs and say what explains the difference.

``torchmem diff base.json new.json`` prints, side by side, the peak and the growth per
step of each device, the time per step, the bytes by role, by module and by line, the
findings that appeared or vanished, and what explains the difference (a new holder, a
bigger batch, a checkpointing change...), each with its numbers. ``--fail-over`` makes it
a CI gate: past the limit, one line on stderr and exit code 1. Two CUDA memory snapshots
(``torch.cuda.memory._dump_snapshot``, or the reports ``torchmem report --json`` wrote of
them) compare the same way: peak allocated and reserved, growth across the trace, the
allocations alive at the peak by line, the findings. Never imports torch.

Exit codes: 0 within every limit (or no limit given); 1 past a ``--fail-over`` limit;
2 on bad input: a missing or corrupted file, inputs of different kinds or schema
versions, inputs that measured different devices (``--device`` picks one both have),
or an output that cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Sequence

from torchmem.cli._output import Output, check_outputs, output, write_text
from torchmem.errors import InputError, UsageError

if TYPE_CHECKING:
    from torchmem.analyze.diff import Side

SUMMARY = ("compare two captures: peak, growth, roles, modules, lines, and what explains the "
           "difference")

class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message, tip=f"run '{self.prog} --help'")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="Compare two captures (written by 'torchmem run --json' or 'torchmem "
                    "doctor --json'), or two CUDA memory snapshots: the first is the "
                    "baseline, the second the new run.",
        epilog="Limits: '10%' or '50MiB' is on the peak of each device; 'growth=64KiB' on "
               "the growth per step; repeat --fail-over for several. Exit code 1 past a limit.",
    )
    parser.add_argument("base", metavar="A", help="the baseline capture")
    parser.add_argument("new", metavar="B", help="the capture to compare with it")
    parser.add_argument("--fail-over", action="append", default=[], metavar="LIMIT",
                        help="exit 1 when B's peak (or growth=...) exceeds A's by more than "
                             "LIMIT: 10%%, 50MiB, peak=5%%, growth=1MiB")
    parser.add_argument("--device", action="append", default=[], metavar="DEVICE",
                        help="compare only this device (repeatable; default: every device, "
                             "which both inputs must have measured)")
    parser.add_argument("--json", metavar="OUT", help="write the diff as JSON")
    parser.add_argument("--html", metavar="OUT", help="write the diff as a self-contained "
                        "HTML page (every row, and both runs' memory per step on one chart)")
    parser.add_argument("--quiet", action="store_true", help="print no report (the exit code "
                        "and the --fail-over lines only)")
    parser.add_argument("--width", type=int, metavar="COLUMNS",
                        help="width of the report (default: the terminal's)")
    return parser


def load_side(path: str) -> "Side":
    """The figures of the capture (or CUDA snapshot, or snapshot report) at ``path``.

    Raises:
        CaptureError, InputError: missing, unreadable, refused or not a capture (exit 2).
    """
    from torchmem.analyze.diff import side_of, side_of_snapshot
    from torchmem.cli._snapshot_report import is_snapshot, is_snapshot_report
    from torchmem.model.capture import Capture

    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise InputError(f"capture not found: {path}",
                         tip="pass two files written by --json") from None
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    if is_snapshot_report(path):
        from torchmem.cli._snapshot_report import load_snapshot_report

        return side_of_snapshot(load_snapshot_report(path), path)
    if is_snapshot(path):
        from torchmem.analyze.snapshot import analyze_snapshot

        return side_of_snapshot(analyze_snapshot(path), path)
    return side_of(Capture.load(path), path)


_KINDS = {"capture": "torchmem capture", "snapshot": "CUDA memory snapshot"}


def _check_alike(a: "Side", b: "Side", devices: list[str]) -> None:
    """Refuse inputs that cannot be compared figure for figure (exit code 2)."""
    if a.kind != b.kind:
        raise InputError(f"{a.label} is a {_KINDS[a.kind]} and {b.label} a {_KINDS[b.kind]}; "
                         "expected two inputs of the same kind",
                         tip="compare captures with captures, snapshots with snapshots")
    if a.schema_version != b.schema_version:
        raise InputError(f"{a.label} has schema version {a.schema_version} and {b.label} "
                         f"{b.schema_version}; expected the same schema version",
                         tip="record both runs with the same torchmem")
    da, db = set(a.peak) | set(a.devices), set(b.peak) | set(b.devices)
    if devices:
        for device in devices:
            missing = [side.label for side, have in ((a, da), (b, db)) if device not in have]
            if missing:
                raise InputError(f"--device {device}: {' and '.join(missing)} did not measure "
                                 f"it; expected one of {', '.join(sorted(da & db)) or 'none'}")
        return
    if da != db:
        raise InputError(f"{a.label} measured {', '.join(sorted(da)) or 'no device'} and "
                         f"{b.label} {', '.join(sorted(db)) or 'no device'}; expected the "
                         "same devices",
                         tip=f"--device {sorted(da & db)[0]} compares one device both measured"
                         if da & db else None)


def _write(out: Output, text: str, flag: str) -> None:
    try:
        write_text(out.path, text)
    except OSError as err:
        raise InputError(f"cannot write {out.shown}: {err.strerror or err}",
                         tip=f"choose a writable path for {flag}") from None
    print(f"diff written to {out.shown}", file=sys.stderr)


def main(argv: Sequence[str], prog: str = "torchmem diff") -> int:
    """Compare the two inputs named in ``argv``; return the exit code (0, 1 past a limit)."""
    args = build_parser(prog).parse_args(list(argv))
    if args.width is not None and args.width < 40:
        raise UsageError(f"--width must be at least 40 columns; got {args.width}")
    from torchmem.analyze.diff import diff_captures, over_limits, parse_limit

    limits = []
    for text in args.fail_over:
        try:
            limits.append(parse_limit(text))
        except ValueError as err:
            raise UsageError(f"--fail-over: {err}") from None
    json_out = output("--json", args.json)
    html_out = output("--html", args.html)
    check_outputs([json_out, html_out], [(f"the capture {args.base}", args.base),
                               (f"the capture {args.new}", args.new)])
    a, b = load_side(args.base), load_side(args.new)
    _check_alike(a, b, args.device)
    diff = diff_captures(a, b, devices=args.device or None)
    exceeded = [f"{prog}: {line}" for line in over_limits(diff, limits)]
    if not args.quiet:
        from torchmem.report.diff import render_diff

        render_diff(diff, file=sys.stdout, width=args.width)
    if json_out is not None:
        data = {"diff": diff.to_dict(), "limits": [lim.text for lim in limits],
                "exceeded": exceeded}
        try:
            text = json.dumps(data, indent=1, allow_nan=False) + "\n"
        except ValueError as err:
            raise InputError(f"cannot write {json_out.shown}: {err}") from None
        _write(json_out, text, "--json")
    if html_out is not None:
        from torchmem.report.diff_html import render_diff_html

        _write(html_out, render_diff_html(diff, exceeded), "--html")
    for line in exceeded:
        print(line, file=sys.stderr)
    return 1 if exceeded else 0
