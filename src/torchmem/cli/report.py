"""``torchmem report``: render a saved JSON capture again (record once, render many).

``torchmem report FILE.json`` prints the same text report ``torchmem run`` or
``torchmem doctor`` printed when the capture was recorded. ``--html OUT`` writes the
self-contained HTML page, ``--json OUT`` writes the capture again (validated and
normalised to this torchmem's schema). Outputs can be combined; ``--text`` adds the
text report when a file output is also asked for. Never imports torch, so a capture
recorded on a GPU machine renders on a laptop. A CUDA memory snapshot
(``torch.cuda.memory._dump_snapshot``, recognised by its first bytes) is analysed by
:mod:`torchmem.cli._snapshot_report` with a reader that never runs anything in the file.

Exit codes: 0 on success; 2 when the capture is missing, corrupted, truncated, not a
torchmem capture or written by a newer torchmem, or an output cannot be written, or would
overwrite the capture or another output (refused before anything is written).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from torchmem.cli._output import capture_json, check_outputs, output, write_output
from torchmem.errors import UsageError
from torchmem.model.capture import Capture

SUMMARY = "render a saved JSON capture as text, HTML or JSON"


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message}", tip=f"run '{self.prog} --help'")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="Render a capture written by 'torchmem run --json' or "
                    "'torchmem doctor --json', or analyse a CUDA memory snapshot written by "
                    "torch.cuda.memory._dump_snapshot(), as text (default), HTML or JSON.",
    )
    parser.add_argument("capture", metavar="FILE.json", nargs="+",
                        help="a capture written with --json; several: the ranks of one "
                             "torchrun job (run.rank*.json), merged into one report")
    parser.add_argument("--text", action="store_true",
                        help="print the text report (the default when no output is given)")
    parser.add_argument("--html", metavar="OUT", help="write a self-contained HTML page")
    parser.add_argument("--json", metavar="OUT", help="write the capture again as JSON")
    parser.add_argument("--width", type=int, metavar="COLUMNS",
                        help="width of the text report (default: the terminal's)")
    return parser


def main(argv: Sequence[str], prog: str = "torchmem report") -> int:
    """Render the capture named in ``argv``; return the exit code.

    Raises:
        UsageError: bad arguments.
        CaptureError: the capture cannot be read (exit code 2).
        InputError: an output file cannot be written (exit code 2).
    """
    args = build_parser(prog).parse_args(list(argv))
    from torchmem.cli._snapshot_report import names_a_snapshot, report_snapshot

    if names_a_snapshot(args.capture):
        return report_snapshot(args, prog)
    from torchmem.cli._rank_report import is_rank_report, report_ranks

    if len(args.capture) > 1 or is_rank_report(args.capture[0]):
        return report_ranks(args, prog)
    args.capture = args.capture[0]
    if args.width is not None and args.width < 20:
        raise UsageError(f"--width must be at least 20 columns; got {args.width}")
    html_out = output("--html", args.html)
    json_out = output("--json", args.json)
    check_outputs([html_out, json_out], [(f"the capture {args.capture}", args.capture)])
    capture = Capture.load(args.capture)
    text = args.text or not (args.html or args.json)
    if text:
        from torchmem.report.terminal import render_capture

        render_capture(capture, file=sys.stdout, width=args.width)
    if html_out is not None:
        from torchmem.report.html import render_html

        write_output(html_out, lambda: render_html(capture), "HTML report")
    if json_out is not None:
        write_output(json_out, lambda: capture_json(capture), "capture")
    return 0


