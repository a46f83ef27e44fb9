"""Read fix commits from git repositories for ``lint_recall_project.py``.

A repository is a bare mirror or a checkout. For one commit this module finds its git
directory, writes the ``.py`` files of a commit's tree into a folder (skipping and counting
the blobs the repository lacks, as in snapshots without their largest files), and reads
the lines a fix changed from ``git diff -U0``. It never fetches: git runs with lazy
fetching and prompts off.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_GIT_ENV = {**os.environ, "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


class NoCheckout(Exception):
    """The commit's repository, commits or file cannot be read (the commit is kept, marked)."""


def _git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], input=data,
                          capture_output=True, env=_GIT_ENV, check=False)
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        raise NoCheckout(f"git {args[0]}: {reason[-1]}")
    return proc.stdout


def _is_git_dir(path: Path) -> bool:
    return path.is_dir() and subprocess.run(
        ["git", "--git-dir", str(path), "rev-parse", "--git-dir"], capture_output=True,
        env=_GIT_ENV, check=False).returncode == 0


def find_git_dir(repo: str, mirrors: Path) -> Path | None:
    """The git directory of ``repo`` ("owner/name") under ``mirrors`` (a JSON map or a folder)."""
    if mirrors.is_file():
        mapped = json.loads(mirrors.read_text(encoding="utf-8")).get(repo)
        places = [Path(mapped)] if mapped else []
    else:
        owner, _, name = repo.partition("/")
        places = [mirrors / f"{owner}+{name}", mirrors / owner / name, mirrors / name]
    for place in places:
        for candidate in (place / ".git", place, place / "repo" / ".git", place / "repo"):
            if _is_git_dir(candidate):
                return candidate
    return None


@dataclass
class Tree:
    """The ``.py`` files of one commit written under ``root``."""

    root: Path
    files: int = 0
    missing_blobs: int = 0


def extract_tree(git_dir: Path, rev: str, dest: Path) -> Tree:
    """Write the ``.py`` blobs of ``rev`` under ``dest``; blobs the repository lacks are counted."""
    listing = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", rev).split(b"\0")
    wanted: list[tuple[str, str]] = []
    for item in filter(None, listing):
        meta, _, raw_path = item.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        path = raw_path.decode("utf-8", errors="surrogateescape")
        if kind == "blob" and mode in ("100644", "100755") and path.endswith(".py"):
            wanted.append((sha, path))
    tree = Tree(dest)
    if not wanted:
        return tree
    out = _git(git_dir, "cat-file", "--batch", data="".join(f"{s}\n" for s, _ in wanted).encode())
    pos = 0
    for sha, path in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":  # "<sha> missing"
            tree.missing_blobs += 1
            continue
        size = int(header[2])
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out[pos:pos + size])
        tree.files += 1
        pos += size + 1
    return tree


def changed_lines(git_dir: Path, parent: str, commit: str, path: str,
                  before_len: int, after_len: int) -> tuple[list[int], list[int]]:
    """Lines of ``path`` the fix changed: (parent side, fix side), from ``git diff -U0``.

    A hunk empty on one side (``-12,0``: inserted after line 12) stands there for the lines
    around the place (12 and 13), kept inside the file.
    """
    diff = _git(git_dir, "diff", "-U0", "--no-color", "--no-ext-diff", parent, commit, "--",
                path).decode("utf-8", errors="replace")
    before: set[int] = set()
    after: set[int] = set()
    for m in _HUNK.finditer(diff):
        for start, count, side, length in ((m[1], m[2], before, before_len),
                                           (m[3], m[4], after, after_len)):
            first, n = int(start), 1 if count is None else int(count)
            lines = range(first, first + n) if n else (first, first + 1)
            side.update(line for line in lines if 1 <= line <= max(length, 1))
    return sorted(before), sorted(after)
