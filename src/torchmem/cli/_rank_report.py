"""``torchmem report run.rank0.json run.rank1.json ...``: one report for every rank.

Given the captures of the ranks of one ``torchrun`` job (``torchmem doctor --json
run.json`` writes ``run.rank<N>.json`` on each rank; a shell glob ``run.rank*.json``
names them all), ``torchmem report`` merges them (:func:`torchmem.analyze.ranks.merge_ranks`)
and prints the merged text report; ``--html OUT`` writes it as one page, ``--json OUT``
saves it (``torchmem report OUT`` renders that file again). Captures of different runs
are refused with one line; ranks without a capture are named in the report. Never
imports torch.
"""

from __future__ import annotations

import json
import os
import re
import sys
from argparse import Namespace
from dataclasses import dataclass

from torchmem.cli._output import ReportStream, check_outputs, output, write_output, write_text
from torchmem.errors import CaptureError
from torchmem.model.capture import MAX_CAPTURE_BYTES, Capture
from torchmem.model.rank_report import KIND, RANK_REPORT_VERSION, MergedRankReport
from torchmem.model.schema import SchemaError, validate

__all__ = ["is_rank_report", "report_ranks", "load_rank_report", "rank_report_json",
           "merged_path", "RankMerge"]

_HEAD = re.compile(rb'\s*\{\s*"kind"\s*:\s*' + re.escape(json.dumps(KIND).encode("utf-8")))


def is_rank_report(path: str) -> bool:
    """Whether ``path`` holds a merged rank report (as ``--json`` writes it); reads only
    its first bytes, and answers False for anything it cannot read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return _HEAD.match(head) is not None


def rank_report_json(report: MergedRankReport) -> str:
    """The merged report as JSON text, ``kind`` first (see :func:`is_rank_report`)."""
    data = report.to_dict()
    data = {"kind": data.pop("kind"), "version": data.pop("version"), **data}
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def load_rank_report(path: str) -> MergedRankReport:
    """Read a merged rank report written by ``--json``.

    Raises:
        CaptureError: unreadable, not JSON, of a newer version, or a value that does not
            match the report's schema (one line naming it).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CAPTURE_BYTES + 1)
        if len(raw) > MAX_CAPTURE_BYTES:
            raise CaptureError(f"{path} is not a valid torchmem rank report; expected at "
                               f"most {MAX_CAPTURE_BYTES} bytes, got a larger file")
        data = json.loads(raw.decode("utf-8"))
    except OSError as err:
        raise CaptureError(f"cannot read {path}: {err.strerror or err}") from None
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError, JSONDecodeError
        raise CaptureError(f"{path} is not a valid torchmem rank report; expected JSON, "
                           f"got {type(err).__name__}",
                           tip="the file may be truncated; write it again with --json") from None
    version = data.get("version") if isinstance(data, dict) else None
    if type(version) is not int or not 1 <= version <= RANK_REPORT_VERSION:
        raise CaptureError(f"{path} has rank report version {version!r}; this torchmem "
                           f"reads 1..{RANK_REPORT_VERSION}",
                           tip="upgrade torchmem to read reports from newer versions")
    try:
        validate(MergedRankReport, data)
        report = MergedRankReport.from_dict(data)
    except (SchemaError, ValueError, TypeError, KeyError) as err:
        raise CaptureError(f"{path} is not a valid torchmem rank report: {err}") from None
    problem = _inconsistency(report)
    if problem:
        raise CaptureError(f"{path} is not a valid torchmem rank report: {problem}")
    return report


def _inconsistency(report: MergedRankReport) -> str | None:
    """What does not add up in a report read from a file (lists of unequal lengths...)."""
    if not report.ranks:
        return "ranks: expected at least one rank, got none"
    for i, spread in enumerate(report.roles):
        if len(spread.bytes) != len(report.ranks):
            return (f"roles[{i}].bytes: expected one value per rank ({len(report.ranks)}), "
                    f"got {len(spread.bytes)}")
    for i, f in enumerate(report.findings):
        if not f.ranks or not len(f.ranks) == len(f.bytes) == len(f.bytes_per_step):
            return (f"findings[{i}]: expected as many ranks, bytes and bytes_per_step "
                    "(at least one)")
    return None


def report_ranks(args: Namespace, prog: str) -> int:
    """Merge (or re-render) the rank captures named by ``args.capture``; return 0.

    Args:
        args: ``torchmem report``'s parsed arguments (``capture`` is a list of paths).
        prog: the command's name, for messages.

    Raises:
        CaptureError: a capture cannot be read, or the captures are not the ranks of one
            run (exit code 2).
        InputError: an output cannot be written (exit code 2).
    """
    from torchmem.analyze.ranks import merge_ranks

    paths: list[str] = list(args.capture)
    html_out = output("--html", args.html)
    json_out = output("--json", args.json)
    check_outputs([html_out, json_out], [(f"the capture {p}", p) for p in paths])
    if len(paths) == 1 and is_rank_report(paths[0]):
        report = load_rank_report(paths[0])
    else:
        report = merge_ranks([(path, Capture.load(path)) for path in paths])
    if args.text or not (args.html or args.json):
        from torchmem.report.ranks_text import render_rank_report

        render_rank_report(report, sys.stdout)
    if html_out is not None:
        from torchmem.report.ranks_html import render_rank_html

        write_output(html_out, lambda: render_rank_html(report), "HTML report")
    if json_out is not None:
        write_output(json_out, lambda: rank_report_json(report), "merged report")
    return 0




def merged_path(path: str) -> str:
    """Where rank 0 writes the merged page of a per-rank output ``path`` (as given,
    before ``rank_path``): ``{rank}`` becomes ``all``, else ``.all-ranks`` goes before
    the extension (``report.html`` -> ``report.all-ranks.html``; a shell glob
    ``report.rank*.html`` does not match it)."""
    if "{rank}" in path:
        return path.replace("{rank}", "all")
    root, ext = os.path.splitext(path)
    return f"{root}.all-ranks{ext}"


@dataclass(frozen=True)
class RankMerge:
    """The end of ``torchmem doctor`` under ``torchrun``: share this rank's capture; on
    rank 0, merge every rank's and print one report for every rank.

    Made with :meth:`prepare` when the command line is parsed (paths are made absolute
    then, before the script can ``os.chdir``); :meth:`finish` runs after the rank's own
    report and files. Nothing happens outside a job of several ranks.

    Attributes:
        timeout: seconds rank 0 waits for the other ranks (0: no merge at all).
        json_template: the ``--json`` path every rank was given, absolute, ``{rank}``
            kept (rank 0 reads the others' files from it when there is no agent store).
        html_shown: where the merged page goes, as shown (``--html`` given), else None.
        html_path: the same, absolute.
    """

    timeout: float
    json_template: str | None = None
    html_shown: str | None = None
    html_path: str | None = None

    @classmethod
    def prepare(cls, json_value: str | None, html_value: str | None,
                timeout: float) -> RankMerge:
        shown = merged_path(html_value) if html_value else None
        return cls(timeout, os.path.abspath(json_value) if json_value else None, shown,
                   os.path.abspath(shown) if shown else None)

    def file_of(self, rank: int) -> str:
        """The capture file rank ``rank`` writes (absolute)."""
        from torchmem.cli._script_args import rank_path

        return rank_path(self.json_template or "", {**os.environ, "RANK": str(rank)})

    def finish(self, capture: Capture, *, source: str, quiet: bool, stream: ReportStream,
               prog: str) -> None:
        """Share ``capture``; on rank 0, print the merged report on ``stream`` (unless
        ``quiet``) and write the merged page (when ``--html`` was given). Never raises,
        never changes the exit code."""
        if self.timeout <= 0:
            return
        try:
            from torchmem.dist.exchange import gather_captures

            gathered = gather_captures(capture, source=source, json_path=self.json_template,
                                       timeout=self.timeout, file_of=self.file_of)
            if gathered is None:
                return
            if not gathered.captures:  # another rank: say only what went wrong
                for note in gathered.notes:
                    stream.say(f"{prog}: {note}")
                return
            from torchmem.analyze.ranks import merge_ranks

            report = merge_ranks(gathered.captures, notes=gathered.notes)
        except Exception as err:  # noqa: BLE001 - the script's exit code must stand
            stream.say(f"{prog}: cannot merge the ranks' captures: "
                       f"{getattr(err, 'message', None) or err}")
            return
        if not quiet:
            from torchmem.report.ranks_text import rank_report_lines

            stream.say("\n" + "\n".join(rank_report_lines(report)))
        if self.html_path:
            try:
                from torchmem.report.ranks_html import render_rank_html

                write_text(self.html_path, render_rank_html(report))
                stream.say(f"HTML report of every rank written to {self.html_shown}")
            except Exception as err:  # noqa: BLE001
                stream.say(f"{prog}: error: cannot write {self.html_shown}: "
                           f"{getattr(err, 'strerror', None) or err}")
