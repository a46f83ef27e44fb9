"""The text report never passes terminal control sequences or rich markup from a capture."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest

from torchmem.model.capture import Culprit, Finding
from torchmem.report.findings import findings_text
from torchmem.report.sanitize import printable, printable_capture
from torchmem.report.terminal import MAX_DEVICES, render_capture, sparkline

#: clear screen, OSC 8 link, OSC 52 clipboard write, C1 CSI, bell, bidi override
HOSTILE = ("\x1b[2J\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07"
           "\x1b]52;c;ZWNobyBwd25lZA==\x07\x9b31m\u202e")
MARKUP = "[link=https://evil.example/]click[/link][blink]:warning:"
SGR = re.compile("\x1b\\[[0-9;]*m")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def _hostile_capture(make_capture, text: str):
    culprit = Culprit(name=text, kind=text, file=f"/w/{text}.py", line=3, code=text,
                      function=text, type=text)
    finding = Finding(cause=text, title=text, device=text, bytes=1 << 20,
                      bytes_per_step=1024.0, culprit=culprit, evidence=(text,),
                      data={text: text, "end_step": 5}, fix=text, confidence=text)
    cap = make_capture(argv0=f"{text}.py", findings=(finding,), error=text, notes=(text,),
                       outcome="exception", environment={text: text})
    device = f"cpu{text}"
    steps = tuple(dataclasses.replace(s, used={device: s.used["cpu"]}) for s in cap.steps)
    return dataclasses.replace(cap, devices=(device,), steps=steps, peak={device: 1},
                               timeline={text: [1.0, 2.0, 3.0]}, step_source=text)


def _on_terminal(capture, monkeypatch) -> str:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    render_capture(capture, file=out, width=120)
    return out.getvalue()


@pytest.mark.parametrize("text", [HOSTILE, MARKUP])
def test_capture_strings_cannot_drive_the_terminal(text, make_capture, monkeypatch):
    page = _on_terminal(_hostile_capture(make_capture, text), monkeypatch)
    assert "\x1b[1m" in page or "\x1b[" in page  # colours are on: this is a terminal
    assert "\x1b]" not in page                  # no OSC: no links, no clipboard writes
    assert not CONTROL.search(SGR.sub("", page))
    if text is HOSTILE:
        assert "\\x1b[2J" in page and "\\x1b]52;c;" in page and "\\u202e" in page
    else:
        assert "[link=https://evil.example/]click[/link]" in page


def test_plain_output_has_no_control_characters(make_capture):
    out = io.StringIO()
    render_capture(_hostile_capture(make_capture, HOSTILE), file=out, width=100)
    assert not CONTROL.search(out.getvalue())


def test_newlines_from_the_capture_do_not_forge_report_lines(make_capture):
    cap = make_capture(notes=("fine\nnote: everything is OK, ignore the findings",),
                       error="boom\r\nfix: rm -rf", outcome="exception")
    out = io.StringIO()
    render_capture(cap, file=out, width=200)
    lines = out.getvalue().splitlines()
    assert not any(line.startswith("note: everything") for line in lines)
    assert not any(line.startswith("fix: rm") for line in lines)
    assert "note: fine\\nnote: everything is OK" in out.getvalue()


def test_findings_text_is_escaped_too(make_capture):
    cap = _hostile_capture(make_capture, HOSTILE)
    assert not any(CONTROL.search(line) for line in findings_text(cap))


def test_very_long_strings_are_shortened_in_the_terminal(make_capture):
    out = io.StringIO()
    render_capture(make_capture(notes=("y" * 10**6,)), file=out, width=100)
    assert len(out.getvalue()) < 20_000
    assert "more characters)" in out.getvalue()


def test_many_devices_are_listed_in_part(make_capture):
    devices = tuple(f"cuda:{i}" for i in range(40))
    cap = make_capture(devices=devices, peak={d: 1 << 20 for d in devices})
    out = io.StringIO()
    render_capture(cap, file=out, width=100)
    assert f"({40 - MAX_DEVICES} more devices not shown" in out.getvalue()


def test_printable():
    assert printable("plain text") == "plain text"
    assert printable("a\x1b[2Jb\n\tc\x9b\x00") == "a\\x1b[2Jb\\n\\tc\\x9b\\x00"
    assert printable("\u202egnp.exe\ufeff\ud800") == "\\u202egnp.exe\\ufeff\\ud800"
    assert printable("x" * 50, limit=10) == "x" * 10 + "… (40 more characters)"
    assert printable(printable(HOSTILE)) == printable(HOSTILE)  # idempotent


def test_printable_capture_keeps_clean_parts_and_numbers(capture):
    assert printable_capture(capture) is capture
    dirty = dataclasses.replace(capture, bytes_by_role={"\x1b": 5})
    assert printable_capture(dirty).bytes_by_role == {"\\x1b": 5}


def test_sparkline_ignores_values_it_cannot_draw():
    assert sparkline([]) == ""
    assert sparkline([float("nan"), float("inf")]) == ""
    assert sparkline([1.0, float("inf"), 2.0]) == "▁█"
    assert sparkline([5.0]) == "▁"
    assert len(sparkline(list(range(1000)), width=0)) == 1
