"""``torchmem lint`` end to end: exit codes, options, fixes, stdin, no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.cli import main as torchmem_main

TRAIN = '''\
import torch


def train(model, loader, optimizer, criterion):
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)  # keeps every graph
    return losses
'''
STORAGE = "import torch\nt = torch.ones(2)\np = t.storage().data_ptr()  # keep\n"
CLEAN = "import torch\n\nx = torch.ones(2).sum().item()\n"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = torchmem_main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text(CLEAN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_exit_codes_zero_clean_one_found_two_usage(project, capsys):
    code, out, _ = cli(capsys, "clean.py", "--isolated")
    assert (code, out.strip()) == (0, "All checks passed! (1 file, 3 lines)")
    code, out, _ = cli(capsys, ".", "--isolated")
    assert code == 1
    assert out.splitlines()[0].startswith("train.py:11:23: TMM101 ")
    assert "Found 1 violation in 1 file (2 files, 15 lines checked)." in out
    code, _, err = cli(capsys, ".", "--select", "TMM9999")
    assert code == 2 and "unknown rule code" in err and "Traceback" not in err
    code, _, err = cli(capsys, "--format", "xml")
    assert code == 2 and "invalid choice" in err
    code, _, err = cli(capsys, ".", "--unsafe-fixes")
    assert code == 2


def test_select_ignore_extend_select_and_exit_zero(project, capsys):
    assert cli(capsys, ".", "--isolated", "--ignore", "TMM1")[0] == 0
    assert cli(capsys, ".", "--isolated", "--select", "TMM4,TMM2")[0] == 0
    assert cli(capsys, ".", "--isolated", "--select", "graph-accumulation")[0] == 1
    assert cli(capsys, ".", "--isolated", "--exit-zero")[0] == 0


def test_noqa_and_pyproject_configuration(project, capsys):
    (project / "train.py").write_text(TRAIN.replace("# keeps every graph", "# noqa: TMM101"))
    assert cli(capsys, ".")[0] == 0
    (project / "train.py").write_text(TRAIN)
    (project / "pyproject.toml").write_text('[tool.torchmem.lint]\nignore = ["TMM101"]\n')
    assert cli(capsys, ".")[0] == 0
    assert cli(capsys, ".", "--isolated")[0] == 1
    (project / "pyproject.toml").write_text('[tool.torchmem.lint]\nbogus = 1\n')
    code, _, err = cli(capsys, ".")
    assert code == 2 and "unknown key 'bogus'" in err


def test_json_and_sarif_outputs_parse(project, capsys):
    code, out, _ = cli(capsys, ".", "--isolated", "--format", "json")
    doc = json.loads(out)
    assert code == 1 and [v["code"] for v in doc["violations"]] == ["TMM101"]
    code, out, _ = cli(capsys, ".", "--isolated", "--format", "sarif", "-o", "out.sarif")
    assert code == 1 and out == ""
    log = json.loads((project / "out.sarif").read_text())
    assert log["runs"][0]["results"][0]["ruleId"] == "TMM101"


def test_statistics(project, capsys):
    (project / "more.py").write_text(TRAIN)
    code, out, _ = cli(capsys, ".", "--isolated", "--statistics")
    assert code == 1
    # TMM101's fix is unsafe: [-], never [*] (that marks what --fix alone would fix)
    assert out.split() == ["2", "TMM101", "[-]", "graph-accumulation"]
    from torchmem.lint import lint_source
    from torchmem.lint.formats import format_statistics
    found = lint_source(TRAIN, "train.py")
    assert format_statistics(found, unsafe=True).split() == ["1", "TMM101", "[-]",
                                                             "graph-accumulation"]


def test_explain(capsys):
    code, out, _ = cli(capsys, "--explain", "TMM101")
    assert code == 0 and out.startswith("# TMM101 graph-accumulation")
    assert "## Use instead" in out
    code, out, _ = cli(capsys, "--explain", "ALL")
    assert code == 0 and "TMM101" in out and "TMM901" in out
    code, _, err = cli(capsys, "--explain", "TMM000")
    assert code == 2 and "unknown rule" in err


def test_fix_diff_and_unsafe_fixes(project, capsys):
    (project / "s.py").write_text(STORAGE)
    safe = any(v.fix and v.fix.safety == "safe" for v in __import__(
        "torchmem.lint", fromlist=["lint_source"]).lint_source(STORAGE))
    code, out, err = cli(capsys, "train.py", "--isolated", "--diff")
    assert (code, out) == (0, "")  # TMM101's fix is unsafe: nothing to do by default
    code, out, err = cli(capsys, "train.py", "--isolated", "--diff", "--unsafe-fixes")
    assert code == 1
    assert "-        losses.append(loss)  # keeps every graph" in out
    assert "Would fix 1 violation in 1 file." in err
    assert (project / "train.py").read_text() == TRAIN  # --diff writes nothing
    code, out, _ = cli(capsys, "train.py", "--isolated", "--fix", "--unsafe-fixes")
    assert code == 0 and "Fixed 1 violation in 1 file." in out
    fixed = (project / "train.py").read_text()
    assert fixed != TRAIN and "# keeps every graph" in fixed
    assert cli(capsys, "train.py", "--isolated", "--fix", "--unsafe-fixes")[0] == 0
    assert (project / "train.py").read_text() == fixed  # idempotent
    if safe:
        code, out, _ = cli(capsys, "s.py", "--isolated", "--fix")
        assert code == 0 and "untyped_storage().data_ptr()  # keep" in (project / "s.py").read_text()


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchmem", "lint", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)


def test_stdin_with_filename_and_fix(tmp_path):
    proc = run("-", "--stdin-filename", "pkg/train.py", "--isolated", cwd=tmp_path, stdin=TRAIN)
    assert proc.returncode == 1
    assert proc.stdout.startswith("pkg/train.py:11:23: TMM101")
    proc = run("-", "--isolated", "--fix", "--unsafe-fixes", cwd=tmp_path, stdin=TRAIN)
    assert proc.returncode == 0
    assert proc.stdout != TRAIN and "# keeps every graph" in proc.stdout
    proc = run("-", "--isolated", "--fix", cwd=tmp_path, stdin=CLEAN)
    assert (proc.returncode, proc.stdout) == (0, CLEAN)


def test_lint_does_not_import_torch_and_colors_only_when_asked(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    code = ("import sys, torchmem.cli as c; rc = c.main(['lint', 'train.py', '--isolated', "
            "'--color', 'always']); assert 'torch' not in sys.modules or "
            "sys.modules['torch'] is None, 'torch imported'; "
            "assert 'rich' not in sys.modules and 'libcst' not in sys.modules; sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "\x1b[" in proc.stdout
    proc = run("train.py", "--isolated", cwd=tmp_path)  # a pipe is not a terminal
    assert "\x1b[" not in proc.stdout


def test_jobs_must_be_positive(project, capsys):
    code, _, err = cli(capsys, ".", "--jobs", "0")
    assert code == 2 and "--jobs" in err


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as info:
        torchmem_main(["lint", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for opt in ["--select", "--extend-select", "--ignore", "--format", "--statistics",
                "--explain", "--fix", "--unsafe-fixes", "--diff", "--jobs", "--config",
                "--stdin-filename", "--exclude"]:
        assert opt in out


def test_diff_names_files_that_could_not_be_linted_on_stderr(project, capsys):
    (project / "broken.py").write_text("def f(:\n")
    code, out, err = cli(capsys, ".", "--isolated", "--diff")
    assert code == 1 and out == ""
    assert "broken.py:1:" in err and "E999" in err


def test_unwritable_output_file_is_a_usage_error_before_any_fix(project, capsys):
    code, _, err = cli(capsys, ".", "--isolated", "--fix", "--unsafe-fixes",
                       "-o", str(project / "no" / "such" / "dir" / "out.txt"))
    assert code == 2 and "--output-file" in err
    assert (project / "train.py").read_text() == TRAIN  # nothing was fixed


def test_pre_commit_hooks_run_torchmem_lint_on_python_files():
    yaml = pytest.importorskip("yaml")
    root = Path(__file__).resolve().parents[2]
    hooks = {h["id"]: h for h in yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["torchmem-lint"]["entry"] == "torchmem lint"
    assert hooks["torchmem-lint-fix"]["entry"] == "torchmem lint --fix"
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types"] == ["python"]
        # pre-commit appends file names: the entry must accept explicit files
        assert hook["entry"].split()[:2] == ["torchmem", "lint"]
