"""File discovery (skips, .gitignore with and without git) and lint_paths (parallel)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from torchmem.lint import files as files_mod
from torchmem.lint.config import LintConfig
from torchmem.lint.discover import GitignoreRules, discover
from torchmem.lint.files import lint_paths

DATA_CODE = "import torch\nw = torch.ones(2)\nv = w.data\n"


def touch(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def rel(found: list[str], root: Path) -> list[str]:
    return sorted(Path(f).resolve().relative_to(root.resolve()).as_posix() for f in found)


def test_walk_skips_vcs_caches_build_and_virtualenvs(tmp_path):
    for name in ["a.py", "pkg/b.py", ".git/hooks/x.py", "__pycache__/c.py", "build/lib/d.py",
                 "dist/e.py", "env/lib/site-packages/f.py", "myenv/g.py", ".tox/h.py",
                 "x.egg-info/i.py", "pkg/notes.txt", "node_modules/j.py"]:
        touch(tmp_path / name)
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    found, problems = discover([str(tmp_path)], LintConfig(root=str(tmp_path)))
    assert problems == []
    assert rel(found, tmp_path) == ["a.py", "pkg/b.py"]


def test_a_package_named_dist_or_build_is_linted_but_build_output_is_not(tmp_path):
    for name in ["dist/__init__.py", "dist/comm.py", "build/__init__.py", "build/x.py",
                 "out/dist/wheel_stub.py", "out/build/lib/y.py"]:
        touch(tmp_path / name)
    found, problems = discover([str(tmp_path)], LintConfig(root=str(tmp_path)))
    assert problems == []
    assert rel(found, tmp_path) == ["build/__init__.py", "build/x.py", "dist/__init__.py",
                                    "dist/comm.py"]


def test_named_file_is_linted_whatever_its_extension_and_duplicates_collapse(tmp_path):
    script = touch(tmp_path / "tool")  # an extension-less script named on purpose
    found, _ = discover([str(script), str(tmp_path), str(tmp_path / ".")], LintConfig())
    assert rel(found, tmp_path) == ["tool"]
    a = touch(tmp_path / "a.py")
    found, _ = discover([str(a), str(tmp_path)], LintConfig())
    assert rel(found, tmp_path) == ["a.py"]  # named once, walked once: listed once


def test_missing_path_is_a_diagnostic_not_an_exception(tmp_path):
    touch(tmp_path / "a.py")
    found, problems = discover([str(tmp_path / "nope.py"), str(tmp_path)], LintConfig())
    assert rel(found, tmp_path) == ["a.py"]
    assert [(p.code, p.path) for p in problems] == [("E902", str(tmp_path / "nope.py"))]
    assert "No such file" in problems[0].message


def test_exclude_globs_prune_directories_and_files(tmp_path):
    for name in ["src/a.py", "third_party/b.py", "src/gen/c.py", "src/x_pb2.py"]:
        touch(tmp_path / name)
    cfg = LintConfig(exclude=("third_party", "src/gen", "*_pb2.py"), root=str(tmp_path))
    found, _ = discover([str(tmp_path)], cfg)
    assert rel(found, tmp_path) == ["src/a.py"]


def test_gitignore_rules_semantics():
    rules = GitignoreRules("", ["# comment", "", "build/", "*.log", "!keep.log", "/top.py",
                                "docs/**/gen_*.py", "\\#hash.py", "trail.py   "])
    assert rules.match("build", is_dir=True) is True
    assert rules.match("build", is_dir=False) is None  # dir-only pattern
    assert rules.match("a/b/x.log") is True
    assert rules.match("keep.log") is False
    assert rules.match("top.py") is True
    assert rules.match("sub/top.py") is None  # anchored to the .gitignore's directory
    assert rules.match("docs/gen_a.py") is True
    assert rules.match("docs/x/y/gen_a.py") is True
    assert rules.match("#hash.py") is True
    assert rules.match("trail.py") is True


def test_gitignore_is_honoured_without_git(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "")  # no git binary: the built-in matcher alone decides
    for name in ["a.py", "out/b.py", "pkg/c.py", "pkg/skip_me.py", "pkg/keep_me.py"]:
        touch(tmp_path / name)
    (tmp_path / ".gitignore").write_text("out/\n")
    (tmp_path / "pkg" / ".gitignore").write_text("*_me.py\n!keep_me.py\n")
    found, _ = discover([str(tmp_path)], LintConfig())
    assert rel(found, tmp_path) == ["a.py", "pkg/c.py", "pkg/keep_me.py"]
    found, _ = discover([str(tmp_path)], LintConfig(respect_gitignore=False))
    assert len(found) == 5


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_check_ignore_adds_info_exclude_and_parent_gitignore(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ["src/a.py", "src/local_only.py", "src/gen/b.py", "data/c.py"]:
        touch(tmp_path / name)
    (tmp_path / ".gitignore").write_text("/data/\ngen/\n")
    (tmp_path / ".git" / "info" / "exclude").write_text("local_only.py\n")
    # linting a subdirectory still applies the repository root's .gitignore
    found, _ = discover([str(tmp_path / "src")], LintConfig())
    assert rel(found, tmp_path) == ["src/a.py"]
    # a file or directory named explicitly is linted even though git ignores it
    found, _ = discover([str(tmp_path / "src" / "local_only.py")], LintConfig())
    assert rel(found, tmp_path) == ["src/local_only.py"]
    found, _ = discover([str(tmp_path / "data")], LintConfig())
    assert rel(found, tmp_path) == ["data/c.py"]


def test_lint_paths_parallel_equals_serial(tmp_path, monkeypatch):
    for i in range(12):
        touch(tmp_path / f"m{i}.py", DATA_CODE * (i + 1))
    touch(tmp_path / "broken.py", "def f(:\n")
    monkeypatch.setattr(files_mod, "PARALLEL_MIN_BYTES", 0)
    serial = lint_paths([str(tmp_path)], config=LintConfig(extend_select=("TMM401",)), jobs=1)
    parallel = lint_paths([str(tmp_path)], config=LintConfig(extend_select=("TMM401",)), jobs=2)
    assert serial == parallel
    assert len(serial.violations) == sum(range(1, 13))
    assert serial.files == 13
    assert serial.lines == 3 * sum(range(1, 13)) + 1
    assert [e.code for e in serial.errors] == ["E999"]


def test_lint_paths_orders_violations_and_accepts_a_single_string(tmp_path):
    touch(tmp_path / "b.py", DATA_CODE)
    touch(tmp_path / "a.py", DATA_CODE + DATA_CODE)
    result = lint_paths(str(tmp_path), config=LintConfig(extend_select=("TMM401",)))
    keys = [(Path(v.path).name, v.line) for v in result.violations]
    assert keys == [("a.py", 3), ("a.py", 6), ("b.py", 3)]
    assert result.found


def test_symlinked_directories_are_not_followed_and_devices_are_refused(tmp_path):
    touch(tmp_path / "pkg" / "a.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "pkg" / "alias.py").symlink_to(tmp_path / "pkg" / "a.py")
    found, problems = discover([str(tmp_path)], LintConfig())
    # the loop is not entered, and a file reached twice (through a symlink) is linted once,
    # so --fix never writes one file from two processes
    assert [Path(f).relative_to(tmp_path).as_posix() for f in found] == ["pkg/a.py"]
    found, problems = discover(["/dev/null"], LintConfig())
    assert found == [] and [p.code for p in problems] == ["E902"]
    assert "not a regular file" in problems[0].message
