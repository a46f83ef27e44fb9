"""The per-line section of the reports: escaped capture strings (terminal and HTML), and
an annotated source view that only quotes a file still holding the measured code."""

from __future__ import annotations

import io

from torchmem.model.capture import Capture
from torchmem.model.lines import AllocationSite, LineProfile, LineRecord, LineWindow, StackFrame
from torchmem.report.html import render_html
from torchmem.report.lines import annotated_source, render_lines

EVIL = "<script>alert('x')</script>\x1b[2J"


def _capture(file: str, code: str = "x = torch.ones(10)", code5: str = EVIL) -> Capture:
    rows = (LineRecord(file=file, line=3, code=code, function="f", allocated_bytes=40,
                       alive_bytes=40, delta_bytes=40, peak_bytes=40, peak_share=0.5),
            LineRecord(file=file, line=5, code=code5, retained_bytes=8, retains=EVIL))
    profile = LineProfile(steps=4, profiled=(LineWindow(step=0, kind="setup"),
                                             LineWindow(step=2, delta_bytes=40)),
                          peak_step=2, peak_bytes=80,
                          sites=(AllocationSite(when="peak", step=2, nbytes=40, holder=EVIL,
                                                made_in="step 2",
                                                stack=(StackFrame(file=file, line=3,
                                                                  function=EVIL),)),))
    return Capture(tool="torchmem lines", version="0", argv=(file,), started_at="",
                   duration_s=1.0, exit_code=0, outcome="ok", lines=rows, line_profile=profile)


def test_terminal_escapes_every_capture_string(tmp_path):
    out = io.StringIO()
    render_lines(_capture(str(tmp_path / "t.py")), file=out)
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\\x1b[2J" in text
    words = " ".join(text.split())  # the report wraps lines after the (temporary) path
    assert "1 of 4 steps profiled exactly (2)" in words
    assert "keeps 8 B/step alive" in words


def test_html_escapes_and_annotates(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import torch\n\nx = torch.ones(10)\n\ny = 1\n", encoding="utf-8")
    page = render_html(_capture(str(script), code5="y = 1"))
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "Annotated source" in page and "import torch" in page  # context from the file


def test_annotated_source_quotes_no_file_that_does_not_hold_the_measured_code(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("a\nb\nSECRET\nc\nd\n", encoding="utf-8")
    view = annotated_source(_capture(str(secret), code="not what is there").lines)
    text = [entry["code"] for entry in view[0]["lines"] if entry is not None]
    assert "SECRET" not in text and "a" not in text
    assert text == ["not what is there", EVIL]
