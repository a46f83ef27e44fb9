"""``torchmem report snapshot.pickle``: analyse a CUDA memory snapshot (no torch).

A file written by ``torch.cuda.memory._dump_snapshot`` is recognised by its first bytes
(a pickle, not JSON text) and analysed by :func:`torchmem.analyze.snapshot
.analyze_snapshot` with the restricted reader: nothing in the file runs, whatever it
holds. ``--text`` (the default) prints the report, ``--html OUT`` writes the page,
``--json OUT`` writes the :class:`~torchmem.model.snapshot.SnapshotReport` as JSON, which
``torchmem report`` renders again later (its first key is ``kind``).

Exit codes: 0 on success; 2 when the snapshot is refused (missing, not a pickle,
truncated, hostile, not a snapshot) or an output cannot be written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from torchmem.cli._output import check_outputs, output, write_output
from torchmem.errors import CaptureError, UsageError
from torchmem.model.snapshot import SNAPSHOT_REPORT_VERSION, SnapshotReport

__all__ = ["is_snapshot", "is_snapshot_report", "names_a_snapshot", "report_snapshot", "KIND"]

#: The ``kind`` a snapshot report written by ``--json`` starts with.
KIND = "torchmem cuda snapshot report"
_HEAD = re.compile(rb'\s*\{\s*"kind"\s*:\s*"' + re.escape(KIND.encode()) + rb'"')
#: Largest snapshot report JSON read back.
MAX_REPORT_BYTES = 64 * 1024 * 1024


def _head(path: str, n: int = 256) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def is_snapshot(path: str) -> bool:
    """Whether ``path`` looks like a snapshot pickle (its first bytes; False if unreadable).
    A ``.pickle``/``.pkl`` name counts too, so a damaged snapshot gets the snapshot errors."""
    from torchmem.model.snapshot_pickle import looks_like_pickle

    head = _head(path, 4)
    return looks_like_pickle(head) or (
        path.lower().endswith((".pickle", ".pkl")) and head[:1] not in (b"{", b"["))


def is_snapshot_report(path: str) -> bool:
    """Whether ``path`` holds a snapshot report written by ``--json``."""
    return _HEAD.match(_head(path)) is not None


def names_a_snapshot(paths: list[str]) -> bool:
    """Whether the command line names a snapshot (or a snapshot report).

    Raises:
        UsageError: a snapshot among several files (they are analysed one at a time).
    """
    found = [p for p in paths if is_snapshot(p) or is_snapshot_report(p)]
    if found and len(paths) > 1:
        raise UsageError(f"{found[0]} is a CUDA memory snapshot; expected one snapshot per "
                         f"command, got {len(paths)} files",
                         tip="run 'torchmem report SNAPSHOT' once for each snapshot")
    return bool(found)


def snapshot_report_json(report: SnapshotReport) -> str:
    """The report as JSON text, ``kind`` first (see :func:`is_snapshot_report`)."""
    return json.dumps({"kind": KIND, **report.to_dict()}, indent=1, allow_nan=False) + "\n"


def load_snapshot_report(path: str) -> SnapshotReport:
    """Read a snapshot report written by ``--json``.

    Raises:
        CaptureError: unreadable, not JSON, newer, or not matching the report's schema.
    """
    from torchmem.model.schema import SchemaError, validate

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_REPORT_BYTES + 1)
    except OSError as err:
        raise CaptureError(f"cannot read {path}: {err.strerror or err}") from None
    bad = f"{path} is not a valid torchmem snapshot report"
    if len(raw) > MAX_REPORT_BYTES:
        raise CaptureError(f"{bad}; expected at most {MAX_REPORT_BYTES} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise CaptureError(f"{bad}; expected JSON ({str(err)[:100]})") from None
    if not isinstance(data, dict):
        raise CaptureError(f"{bad}; expected an object")
    data.pop("kind", None)
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) \
            or not 1 <= version <= SNAPSHOT_REPORT_VERSION:
        raise CaptureError(f"{path} has format_version {str(version)[:20]}; this torchmem "
                           f"reads 1..{SNAPSHOT_REPORT_VERSION}",
                           tip="upgrade torchmem to read reports from newer versions")
    try:
        validate(SnapshotReport, data)
        return SnapshotReport.from_dict(data)
    except (SchemaError, ValueError, TypeError, KeyError) as err:
        raise CaptureError(f"{bad}: {str(err)[:300]}") from None


def report_snapshot(args: argparse.Namespace, prog: str) -> int:
    """Render the snapshot (or snapshot report) ``args.capture[0]``; return the exit code."""
    path = args.capture[0]
    if args.width is not None and args.width < 20:
        raise UsageError(f"--width must be at least 20 columns; got {args.width}")
    html_out = output("--html", args.html)
    json_out = output("--json", args.json)
    check_outputs([html_out, json_out], [(f"the snapshot {path}", path)])
    if is_snapshot_report(path):
        report = load_snapshot_report(path)
    else:
        from torchmem.analyze.snapshot import analyze_snapshot

        report = analyze_snapshot(path)
    if args.text or not (args.html or args.json):
        from torchmem.report.snapshot_text import render_snapshot

        render_snapshot(report, file=sys.stdout, width=args.width)
    if html_out is not None:
        from torchmem.report.snapshot_html import render_snapshot_html

        write_output(html_out, lambda: render_snapshot_html(report), "HTML report")
    if json_out is not None:
        write_output(json_out, lambda: snapshot_report_json(report), "snapshot report")
    return 0


