"""``torchmem report``: render a saved capture; bad captures are one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from torchmem.cli import main
from torchmem.model.capture import SCHEMA_VERSION, Capture


def _saved(capture, tmp_path):
    return str(capture.save(tmp_path / "run.json"))


def test_text_is_the_default_and_goes_to_stdout(capture, tmp_path, capsys):
    assert main(["report", _saved(capture, tmp_path), "--width", "120"]) == 0
    out, err = capsys.readouterr()
    assert "torchmem doctor" in out and "train.py" in out
    assert "losses.append(loss)" in out
    assert err == ""


def test_html_and_json_outputs(capture, tmp_path, capsys):
    src = _saved(capture, tmp_path)
    html, again = tmp_path / "out" / "r.html", tmp_path / "out" / "r.json"
    assert main(["report", src, "--html", str(html), "--json", str(again)]) == 0
    out, err = capsys.readouterr()
    assert out == ""                                  # no text unless --text
    assert "HTML report written" in err and "capture written" in err
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert Capture.load(again).to_dict() == capture.to_dict()


def test_text_with_a_file_output(capture, tmp_path, capsys):
    src = _saved(capture, tmp_path)
    assert main(["report", src, "--text", "--html", str(tmp_path / "r.html")]) == 0
    assert "torchmem doctor" in capsys.readouterr().out


def _broken_files(capture, tmp_path):
    good = capture.to_dict()
    text = json.dumps(good)
    cases = {
        "truncated": text[: len(text) // 2],
        "not_json": "hello, world",
        "binary": b"\xff\xfe\x00garbage",
        "a_list": "[1, 2, 3]",
        "no_schema": json.dumps({"tool": "x"}),
        "newer": json.dumps(dict(good, schema_version=SCHEMA_VERSION + 1)),
        "bad_version": json.dumps(dict(good, schema_version="one")),
        "bad_steps": json.dumps(dict(good, steps="abc")),
        "bad_field": json.dumps(dict(good, exit_code="zero")),
        "empty": "",
    }
    paths = {}
    for name, body in cases.items():
        p = tmp_path / f"{name}.json"
        if isinstance(body, bytes):
            p.write_bytes(body)
        else:
            p.write_text(body, encoding="utf-8")
        paths[name] = p
    return paths


@pytest.mark.parametrize("case", ["truncated", "not_json", "binary", "a_list", "no_schema",
                                  "newer", "bad_version", "bad_steps", "bad_field", "empty"])
def test_broken_captures_are_one_line_exit_2(case, capture, tmp_path, capsys):
    path = _broken_files(capture, tmp_path)[case]
    assert main(["report", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("torchmem report: error: ")
    assert str(path) in lines[0]
    assert len(lines) <= 2 and all(not l.startswith("Traceback") for l in lines)
    if case == "newer":
        assert "schema_version" in lines[0] and "upgrade" in err


def test_missing_file_and_bad_arguments(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.json")]) == 2
    assert "capture not found" in capsys.readouterr().err
    assert main(["report"]) == 2
    assert "required" in capsys.readouterr().err
    assert main(["report", "x.json", "--bogus"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_unwritable_output_is_one_line(capture, tmp_path, capsys):
    src = _saved(capture, tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", src, "--html", str(blocker / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("torchmem report: error: cannot write")
    assert "Traceback" not in err


def test_report_never_imports_torch(capture, tmp_path):
    src = _saved(capture, tmp_path)
    code = ("import sys; from torchmem.cli import main; "
            f"rc = main(['report', {src!r}, '--html', {str(tmp_path / 'r.html')!r}, '--text']); "
            "assert rc == 0, rc; assert 'torch' not in sys.modules, 'torch imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _hostile_files(capture, tmp_path):
    good = capture.to_dict()
    text = json.dumps(good)
    deep = "[" * 100_000 + "]" * 100_000
    bodies = {
        "deep_nesting": text.replace('"notes": []', f'"notes": {deep}'),
        "nan_literal": text.replace('"duration_s": 2.5', '"duration_s": NaN'),
        "huge_int": text.replace('"exit_code": 0', f'"exit_code": {2**80}'),
        "null_tool": json.dumps(dict(good, tool=None)),
        "escape_in_bad_value": json.dumps(dict(good, exit_code="\x1b[2J\x1b]52;c;eA==\x07")),
        "top_level_number": "12",
        "not_utf8": b'{"tool": "\xff\xfe"}',
    }
    assert bodies["deep_nesting"] != text and bodies["nan_literal"] != text
    paths = {}
    for name, body in bodies.items():
        p = tmp_path / f"{name}.json"
        p.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
        paths[name] = p
    return paths


@pytest.mark.parametrize("case, mode", [
    ("deep_nesting", "--text"), ("nan_literal", "--html"), ("huge_int", None),
    ("null_tool", "--html"), ("escape_in_bad_value", "--text"), ("top_level_number", None),
    ("not_utf8", "--html"),
])
def test_hostile_captures_through_the_real_cli(case, mode, capture, tmp_path):
    path = _hostile_files(capture, tmp_path)[case]
    out_html = tmp_path / "out.html"
    args = [sys.executable, "-m", "torchmem", "report", str(path)]
    args += {"--text": ["--text"], "--html": ["--html", str(out_html)], None: []}[mode]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("torchmem report: error: ") and str(path) in lines[0]
    assert len(lines) <= 2 and "Traceback" not in proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert not out_html.exists()


def test_a_valid_capture_full_of_escape_sequences_renders_escaped(make_capture, tmp_path):
    evil = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m"
    cap = make_capture(argv0=f"{evil}.py", notes=(evil,), error=evil, outcome="exception")
    src = _saved(cap, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "torchmem", "report", src, "--text",
                           "--html", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x9b" not in proc.stdout and "\x07" not in proc.stdout
    assert "\\x1b[2J" in proc.stdout
