"""Bad input: every file gets a clear diagnostic, the others are still linted, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.lint import engine
from torchmem.lint.config import LintConfig
from torchmem.lint.files import decode_source, lint_paths

DATA_CODE = "import torch\nw = torch.ones(2)\nv = w.data\n"


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text(DATA_CODE, encoding="utf-8")
    (tmp_path / "syntax.py").write_text("import torch\ndef f(:\n    pass\n", encoding="utf-8")
    (tmp_path / "latin1_nocookie.py").write_bytes(b"x = 1\ns = '\xe9t\xe9'\n")
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "binary.py").write_bytes(b"\x7fELF\x02\x01\x00\x00binary")
    (tmp_path / "badcookie.py").write_bytes(b"# -*- coding: klingon -*-\nx = '\xe9'\n")
    (tmp_path / "cookie.py").write_bytes(
        b"# -*- coding: latin-1 -*-\ns = '\xe9\xe9'; import torch\nw = torch.ones(2); v = w.data\n")
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + DATA_CODE.encode())
    return tmp_path


def test_each_bad_file_gets_one_diagnostic_and_the_rest_is_linted(messy):
    result = lint_paths([str(messy), str(messy / "missing.py")], config=LintConfig(extend_select=("TMM401",)), jobs=1)
    errors = {Path(e.path).name: (e.code, e.line, e.message) for e in result.errors}
    assert set(errors) == {"syntax.py", "latin1_nocookie.py", "binary.py", "badcookie.py",
                           "missing.py"}
    assert errors["syntax.py"][:2] == ("E999", 2)
    assert "syntax" in errors["syntax.py"][2].lower()
    assert not errors["syntax.py"][2].startswith(str(messy))  # no doubled path prefix
    assert errors["latin1_nocookie.py"][0] == "E902"
    assert "not valid utf-8 at byte 11" in errors["latin1_nocookie.py"][2]
    assert "PEP 263" in errors["latin1_nocookie.py"][2]
    assert errors["binary.py"] == ("E902", 1,
                                   "binary file (contains NUL bytes); expected Python source")
    assert "unknown encoding: klingon" in errors["badcookie.py"][2]
    assert "not valid utf-8 at byte 31 (line 2)" in errors["badcookie.py"][2]
    assert errors["missing.py"][0] == "E902"
    found = {(Path(v.path).name, v.line, v.col) for v in result.violations}
    # cookie.py: the column counts characters of the decoded text, not latin-1 bytes
    assert found == {("good.py", 3, 4), ("bom.py", 3, 4), ("cookie.py", 3, 23)}


def test_decode_source_honours_bom_and_cookie():
    assert decode_source(b"\xef\xbb\xbfx = 1\n", "a.py").encoding == "utf-8-sig"
    src = decode_source(b"# coding: cp1252\nx = '\x80'\n", "a.py")
    assert src.encoding == "cp1252" and "\u20ac" in src.text
    assert decode_source(b"", "a.py").text == ""


def test_a_cookie_naming_a_codec_registered_at_run_time_is_read_as_utf8(tmp_path):
    cookie = b"# -*- coding: future_fstrings -*-\n"
    (tmp_path / "fstrings.py").write_bytes(cookie + ("s = f'\u00e9{1}'\n" + DATA_CODE).encode())
    (tmp_path / "latin.py").write_bytes(cookie + b"s = '\xe9'\n" + DATA_CODE.encode())
    result = lint_paths([str(tmp_path)], config=LintConfig(extend_select=("TMM401",)), jobs=1)
    assert [(Path(e.path).name, e.code) for e in result.errors] == [("latin.py", "E902")]
    assert [(Path(v.path).name, v.line) for v in result.violations] == [("fstrings.py", 5)]
    assert decode_source(cookie + b"x = 1\n", "a.py").encoding == "utf-8"


def test_an_exception_inside_the_linter_is_reported_for_that_file_only(tmp_path, monkeypatch):
    real = engine.lint_source

    def crashing(text, path="<string>", **kw):
        if path.endswith("boom.py"):
            raise KeyError("unexpected node")
        return real(text, path, **kw)

    monkeypatch.setattr(engine, "lint_source", crashing)
    (tmp_path / "boom.py").write_text("x = 1\n")
    (tmp_path / "ok.py").write_text(DATA_CODE)
    result = lint_paths([str(tmp_path)], config=LintConfig(extend_select=("TMM401",)), jobs=1)
    assert [(Path(e.path).name, e.code) for e in result.errors] == [("boom.py", "TMM000")]
    assert "KeyError" in result.errors[0].message
    assert [Path(v.path).name for v in result.violations] == ["ok.py"]


def test_deeply_nested_code_is_a_diagnostic(tmp_path):
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    result = lint_paths([str(tmp_path / "deep.py")], config=LintConfig(extend_select=("TMM401",)))
    assert [e.code for e in result.errors] == ["E999"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root can read anything")
def test_unreadable_file(tmp_path):
    f = tmp_path / "secret.py"
    f.write_text("x = 1\n")
    f.chmod(0)
    result = lint_paths([str(f)], config=LintConfig(extend_select=("TMM401",)))
    assert [e.code for e in result.errors] == ["E902"]
    assert "Permission denied" in result.errors[0].message


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", "lint", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_never_prints_a_traceback_on_bad_input(messy):
    proc = run_cli(".", "missing.py", "--isolated", cwd=messy)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "syntax.py:2:" in proc.stdout and "E999" in proc.stdout
    assert "binary.py:1:1: E902 binary file" in proc.stdout
    assert "missing.py:1:1: E902 No such file or directory" in proc.stdout
    assert "5 files could not be linted" in proc.stdout


def test_cli_directory_without_python_files_warns_and_exits_zero(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    proc = run_cli(str(tmp_path), "--isolated", cwd=tmp_path)
    assert proc.returncode == 0
    assert "no Python files found" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("source, says", [
    ("type Vec = list[float]\n", "type parameters or a `type` statement: Python 3.12 syntax"),
    ("def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
     "type parameters or a `type` statement: Python 3.12 syntax"),
    ("x = f\"{\"a\"}\"\n", "if the f-string nests its own quotes or spans lines"),
])
def test_newer_syntax_is_named_as_such_on_an_older_interpreter(tmp_path, source, says):
    (tmp_path / "new.py").write_text(source, encoding="utf-8")
    result = lint_paths([str(tmp_path)], config=LintConfig())
    if sys.version_info >= (3, 12):  # it is valid Python there: linted, no diagnostic
        assert result.errors == [] and result.files == 1
        return
    (err,) = result.errors
    assert err.code == "E999"
    version = ".".join(map(str, sys.version_info[:2]))
    assert f"not valid Python {version}" in err.message and says in err.message


def test_an_ordinary_syntax_error_is_not_blamed_on_newer_syntax(tmp_path):
    (tmp_path / "bad.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    (err,) = lint_paths([str(tmp_path)], config=LintConfig()).errors
    assert "3.12" not in err.message and "not valid Python: " in err.message
