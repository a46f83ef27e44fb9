"""``lint --fix`` writes through symlinks and hard links, keeps the mode, refuses read-only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.lint.config import LintConfig
from torchmem.lint.files import lint_paths

BUGGY = "import torch\nx = torch.ones(1)\r\ny = x.data  # café\r\n"
FIXED = "import torch\nx = torch.ones(1)\r\ny = x.detach()  # café\r\n"

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32",
                                    reason="symlinks need a POSIX system")


def fix(*paths: Path):
    return lint_paths([str(p) for p in paths], config=LintConfig(extend_select=("TMM401",)), fix=True,
                      unsafe_fixes=True)


def write(path: Path, text: str = BUGGY, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


@needs_symlinks
def test_symlink_target_is_fixed_and_the_link_stays_a_link(tmp_path):
    real = write(tmp_path / "real.py")
    link = tmp_path / "link.py"
    link.symlink_to("real.py")
    result = fix(link)
    assert result.fixed == 1 and not result.errors
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert real.read_bytes() == FIXED.encode()
    assert sorted(os.listdir(tmp_path)) == ["link.py", "real.py"]


@needs_symlinks
def test_symlink_chain_into_another_directory(tmp_path):
    (tmp_path / "lib").mkdir()
    real = write(tmp_path / "lib" / "real.py")
    (tmp_path / "mid.py").symlink_to(Path("lib") / "real.py")
    (tmp_path / "top.py").symlink_to("mid.py")
    result = fix(tmp_path / "top.py")
    assert result.fixed == 1
    assert (tmp_path / "top.py").is_symlink() and (tmp_path / "mid.py").is_symlink()
    assert real.read_bytes() == FIXED.encode()
    assert sorted(os.listdir(tmp_path / "lib")) == ["real.py"]


def test_hard_link_keeps_one_inode_and_both_names_see_the_fix(tmp_path):
    first = write(tmp_path / "a.py")
    second = tmp_path / "b.py"
    os.link(first, second)
    inode = first.stat().st_ino
    result = fix(second)
    assert result.fixed == 1 and not result.errors
    assert first.stat().st_ino == second.stat().st_ino == inode
    assert first.stat().st_nlink == 2
    assert first.read_bytes() == second.read_bytes() == FIXED.encode()


@pytest.mark.parametrize("mode", [0o755, 0o640, 0o600])
def test_mode_encoding_and_newlines_are_preserved(tmp_path, mode):
    path = write(tmp_path / "m.py", "# -*- coding: latin-1 -*-\n" + BUGGY, "latin-1")
    os.chmod(path, mode)
    assert fix(path).fixed == 1
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert path.read_bytes() == ("# -*- coding: latin-1 -*-\n" + FIXED).encode("latin-1")
    assert sorted(os.listdir(tmp_path)) == ["m.py"]


def test_read_only_file_is_a_per_file_error_and_nothing_changes(tmp_path):
    locked = write(tmp_path / "locked.py")
    other = write(tmp_path / "other.py")
    os.chmod(locked, 0o444)
    try:
        result = fix(locked, other)
        assert other.read_bytes() == FIXED.encode()
        assert locked.read_bytes() == BUGGY.encode()
        assert [(e.path, e.code) for e in result.errors] == [(str(locked), "E902")]
        assert "read-only" in result.errors[0].message
        assert result.fixed == 1 and result.fixed_files == (str(other),)
        # the unfixed file's findings are still reported
        assert [v.path for v in result.violations] == [str(locked)]

        proc = subprocess.run(
            [sys.executable, "-m", "torchmem", "lint", "--isolated", "--extend-select", "TMM401", "--fix",
             "--unsafe-fixes", "locked.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 1
        assert "Traceback" not in proc.stdout + proc.stderr
        assert "locked.py:1:1: E902 cannot write the fixed file: the file is read-only" \
            in proc.stdout
        assert locked.read_bytes() == BUGGY.encode()
    finally:
        os.chmod(locked, 0o644)


def test_file_in_a_read_only_directory_is_written_in_place(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    path = write(d / "m.py")
    os.chmod(d, 0o555)
    try:
        assert fix(path).fixed == 1
        assert path.read_bytes() == FIXED.encode()
    finally:
        os.chmod(d, 0o755)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="changing a file's owner and group needs root")
def test_owner_and_group_are_kept(tmp_path):
    path = write(tmp_path / "m.py")
    os.chown(path, 4321, 8765)
    inode = path.stat().st_ino
    assert fix(path).fixed == 1
    st = path.stat()
    assert (st.st_uid, st.st_gid, st.st_ino) == (4321, 8765, inode)
    assert path.read_bytes() == FIXED.encode()
