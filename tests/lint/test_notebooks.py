"""Jupyter notebooks: code cells linted as one module, cell-relative locations, --fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.lint.config import LintConfig
from torchmem.lint.discover import discover
from torchmem.lint.files import lint_paths
from torchmem.lint.notebook import _statement_starts


def cell(source: str | list[str], kind: str = "code") -> dict:
    out = {"cell_type": kind, "metadata": {"tags": ["keep"]}, "source": source}
    if kind == "code":
        out.update(execution_count=3, outputs=[{"output_type": "stream", "name": "stdout",
                                                "text": ["héllo\n"]}])
    return out


def notebook(path: Path, *cells: dict, lang: str = "python") -> Path:
    doc = {"cells": list(cells),
           "metadata": {"kernelspec": {"name": "k", "language": lang, "display_name": "K"},
                        "language_info": {"name": lang}},
           "nbformat": 4, "nbformat_minor": 5}
    # what nbformat itself writes
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def lint(*paths: Path, **kw):
    return lint_paths([str(p) for p in paths], config=LintConfig(extend_select=("TMM4",)), **kw)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", "lint", "--isolated", "--extend-select", "TMM4", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


SETUP = ["import torch\n", "x = torch.ones(2)"]


def test_findings_are_reported_per_cell_and_names_flow_between_cells(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell("# Title\n", "markdown"), cell(SETUP),
                  cell("%matplotlib inline\ny = x.data\n"))
    result = lint(nb)
    assert [(v.cell, v.line, v.col, v.code) for v in result.violations] == [
        (3, 2, 4, "TMM401")]
    assert result.lines == 4 and not result.errors
    proc = cli("nb.ipynb", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("nb.ipynb:cell_3:2:5: TMM401 ")
    assert "All checks passed" not in proc.stdout


def test_magics_are_skipped_but_python_is_still_parsed(tmp_path):
    nb = notebook(
        tmp_path / "nb.ipynb",
        cell(["!pip install torch\n", "files = !ls\n", "torch.ones?\n", "?torch.zeros\n",
              *SETUP, "\n", "for i in range(2):\n", "    %time y = x.data\n",
              "msg = ('%d items'\n", "       % 3)\n", 's = """\n', "%not a magic\n",
              '"""\n']),
        cell("%%bash\necho this is not python ((\n"),
        cell("%%time\nz = x.data\n"))
    result = lint(nb)
    assert not result.errors, result.errors
    # columns count the "%time " that was set aside while linting
    assert [(v.cell, v.line, v.col) for v in result.violations] == [(1, 8, 14), (3, 2, 4)]


def test_statement_start_scanner():
    lines = ["a = (1,\n", "     % 2)\n", "b = '''\n", "%x\n", "'''\n", "c = 1 + \\\n",
             "  2\n", "%time f()\n", "s = 'a(' # (\n", "!ls\n"]
    assert _statement_starts(lines) == [True, False, True, False, False, True, False,
                                        True, True, True]


def test_fix_changes_only_the_cell_source_and_keeps_the_rest(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell("Some *markdown* é\n", "markdown"),
                  cell(SETUP), cell("!nvidia-smi\ny = x.data  # café"),
                  cell(["for i in range(2):\n", "    %time w = x.data\n"]))
    before = json.loads(nb.read_text(encoding="utf-8"))
    result = lint(nb, fix=True, unsafe_fixes=True)
    assert result.fixed == 2 and result.fixed_files == (str(nb),)
    assert result.violations == () and result.errors == ()
    expected = json.loads(json.dumps(before))
    expected["cells"][2]["source"] = "!nvidia-smi\ny = x.detach()  # café"
    expected["cells"][3]["source"] = ["for i in range(2):\n", "    %time w = x.detach()\n"]
    written = nb.read_text(encoding="utf-8")
    assert written == json.dumps(expected, indent=1, ensure_ascii=False) + "\n"
    assert lint(nb, fix=True, unsafe_fixes=True).fixed == 0  # idempotent


def test_diff_shows_cells_and_changes_nothing(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell(SETUP), cell("y = x.data\n"))
    original = nb.read_bytes()
    proc = cli("--diff", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path)
    assert proc.returncode == 1
    assert "--- a/nb.ipynb:cell_2\n+++ b/nb.ipynb:cell_2\n" in proc.stdout
    assert "-y = x.data\n+y = x.detach()\n" in proc.stdout
    assert nb.read_bytes() == original


def test_syntax_error_in_a_cell_is_located_in_that_cell(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell(SETUP), cell("y = (\n"))
    result = lint(nb)
    assert [(e.code, e.cell, e.line) for e in result.errors] == [("E999", 2, 1)]
    proc = cli("nb.ipynb", cwd=tmp_path)
    assert proc.returncode == 1 and "nb.ipynb:cell_2:1:" in proc.stdout
    assert "All checks passed" not in proc.stdout


@pytest.mark.parametrize("content, expected", [
    ("{not json", "not a Jupyter notebook: invalid JSON"),
    ('{"worksheets": [], "nbformat": 3}',
     "not a Jupyter notebook this linter reads; expected nbformat 4 JSON, got nbformat 3"),
    ('{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4}',
     "cell_1: 'source' is neither"),
])
def test_a_file_that_is_not_a_notebook_is_one_clear_error(tmp_path, content, expected):
    (tmp_path / "bad.ipynb").write_text(content)
    proc = cli("bad.ipynb", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"bad.ipynb:1:1: E902 {expected}" in proc.stdout


def test_non_python_notebooks_are_skipped(tmp_path):
    nb = notebook(tmp_path / "r.ipynb", cell("x <- c(1, 2)\n"), lang="R")
    result = lint(nb)
    assert result.violations == () and result.errors == ()


def test_directories_include_notebooks_but_not_checkpoints(tmp_path):
    notebook(tmp_path / "a.ipynb", cell(SETUP))
    (tmp_path / ".ipynb_checkpoints").mkdir()
    notebook(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", cell(SETUP))
    (tmp_path / "b.py").write_text("x = 1\n")
    files, _ = discover([str(tmp_path)], LintConfig())
    assert sorted(Path(f).name for f in files) == ["a.ipynb", "b.py"]
    files, _ = discover([str(tmp_path)], LintConfig().merged(exclude=["*.ipynb"]))
    assert [Path(f).name for f in files] == ["b.py"]


def test_stdin_notebook_with_fix_prints_the_fixed_json(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell(SETUP), cell("y = x.data\n"))
    proc = subprocess.run(
        [sys.executable, "-m", "torchmem", "lint", "--isolated", "--extend-select", "TMM4", "--fix", "--unsafe-fixes",
         "-", "--stdin-filename", "nb.ipynb"], input=nb.read_text(encoding="utf-8"),
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cells"][1]["source"] == "y = x.detach()\n"


def test_python_files_that_cannot_be_read_or_parsed_say_so(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"s = 'caf\xe9'\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    proc = cli("latin.py", "broken.py", cwd=tmp_path)
    assert proc.returncode == 1 and "All checks passed" not in proc.stdout
    assert "latin.py:1:1: E902 not valid utf-8 at byte 8 (line 1)" in proc.stdout
    assert "broken.py:1:7: E999 not valid Python" in proc.stdout


def test_crlf_cells_keep_their_line_endings_and_untouched_cells_stay_identical(tmp_path):
    nb = notebook(tmp_path / "nb.ipynb", cell("import torch\r\nx = torch.ones(2)\r\n"),
                  cell("y = x.data\r\nz = 1\x0c + 1\r\n"), cell("%%writefile f.txt\nhi (\n"))
    before = json.loads(nb.read_text(encoding="utf-8"))
    result = lint(nb, fix=True, unsafe_fixes=True)
    assert result.fixed == 1 and not result.errors
    after = json.loads(nb.read_text(encoding="utf-8"))
    assert after["cells"][0] == before["cells"][0] and after["cells"][2] == before["cells"][2]
    assert after["cells"][1]["source"] == "y = x.detach()\r\nz = 1\x0c + 1\r\n"
