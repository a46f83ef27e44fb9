"""torchmem._files.write_file: the one writer behind captures, HTML reports and lint --fix."""

from __future__ import annotations

import os
import stat

import pytest

from torchmem._files import write_file
from torchmem.model.capture import Capture
from torchmem.report.html import write_html


def _mode(path: os.PathLike[str] | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _capture() -> Capture:
    return Capture(tool="torchmem doctor", version="0", argv=("train.py",),
                   started_at="2026-01-01T00:00:00+00:00", duration_s=1.0, exit_code=0,
                   outcome="ok")


def test_library_outputs_are_shared_like_any_file(tmp_path, umask_022) -> None:
    # Capture.save and write_html made 0600 files whatever the umask
    saved = _capture().save(tmp_path / "run.json")
    page = write_html(_capture(), tmp_path / "run.html")
    assert _mode(saved) == 0o644 and _mode(page) == 0o644
    assert Capture.load(saved) == _capture()


def test_existing_mode_is_kept_and_symlinks_are_written_through(tmp_path, umask_022) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_file(link, b"new")
    assert link.is_symlink() and target.read_text() == "new" and _mode(target) == 0o640


def test_hard_links_keep_one_inode(tmp_path) -> None:
    a = tmp_path / "a.txt"
    a.write_text("old")
    b = tmp_path / "b.txt"
    os.link(a, b)
    write_file(b, b"new")
    assert a.read_text() == "new" and os.stat(a).st_ino == os.stat(b).st_ino


def test_a_directory_is_refused_and_nothing_is_left_behind(tmp_path) -> None:
    with pytest.raises(IsADirectoryError):
        write_file(tmp_path, b"x")
    assert sorted(os.listdir(tmp_path)) == []
