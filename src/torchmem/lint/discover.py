"""Which files ``torchmem lint PATH...`` checks.

A named file is always linted (whatever its extension; ``*.ipynb`` is read as a Jupyter
notebook). A named directory is walked for ``*.py`` files and Jupyter notebooks
(``*.ipynb``, as ruff does since 0.6; leave them out with ``exclude = ["*.ipynb"]``),
skipping version-control and cache directories, virtual environments (a
directory holding ``pyvenv.cfg``), ``build``/``dist`` output directories (a directory of
that name holding an ``__init__.py`` is a real package and is linted), ``site-packages``,
the configured
``exclude`` globs, and whatever ``.gitignore`` ignores. Ignored directories are pruned
while walking with a small gitignore matcher; inside a git work tree the survivors are
then checked by ``git check-ignore --stdin`` so that ``.git/info/exclude`` and the global
excludes file count too.

Example:
    >>> from torchmem.lint.discover import discover
    >>> files, problems = discover(["src"])  # doctest: +SKIP

Known limitations:
    Files tracked by git but matching a ``.gitignore`` pattern are skipped during a
    directory walk (as ruff does); name them explicitly to lint them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchmem.lint.config import LintConfig
from torchmem.lint.violation import Violation

__all__ = ["LINTED_SUFFIXES", "SKIP_DIRS", "GitignoreRules", "discover", "io_error"]

#: file name endings collected from directories
LINTED_SUFFIXES = (".py", ".ipynb")

#: directory names never entered during a walk
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", "_darcs", ".jj", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".venv", "venv", ".eggs", "build",
    "dist", "site-packages", "node_modules", ".ipynb_checkpoints", "__pypackages__",
    ".direnv", "buck-out", "_build", ".pytype",
})
#: build-output names that are also plausible package names (``torch.distributed`` code
#: often lives in a ``dist`` package): skipped only when they are not a package
_OUTPUT_DIRS = frozenset({"build", "dist", "_build"})


def io_error(path: str, message: str) -> Violation:
    """A per-file diagnostic for a file that could not be read (code ``E902``)."""
    return Violation(path=path, line=1, col=0, end_line=1, end_col=0, code="E902",
                     name="io-error", message=message)


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def _translate(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[":
            j = glob.find("]", i + 2)
            if j == -1:
                out.append(re.escape("["))
                i += 1
            else:
                body = glob[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        elif glob[i] == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


class GitignoreRules:
    """The patterns of one ``.gitignore`` file, matched relative to its directory.

    Example:
        >>> rules = GitignoreRules("", ["build/", "*.log", "!keep.log"])
        >>> rules.match("build", is_dir=True), rules.match("a/x.log"), rules.match("keep.log")
        (True, True, False)
    """

    def __init__(self, base: str, lines: Iterable[str]) -> None:
        self.base = base
        self.patterns: list[_Pattern] = []
        for raw in lines:
            line = raw.rstrip("\n").rstrip("\r")
            while line.endswith(" ") and not line.endswith("\\ "):
                line = line[:-1]
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate or line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            self.patterns.append(_Pattern(re.compile(_translate(line) + r"\Z"), negate,
                                          dir_only, anchored))

    def match(self, rel: str, *, is_dir: bool = False) -> bool | None:
        """``True`` ignored, ``False`` re-included by ``!``, ``None`` no pattern matched."""
        name = rel.rsplit("/", 1)[-1]
        result = None
        for p in self.patterns:
            if p.dir_only and not is_dir:
                continue
            if p.regex.match(rel if p.anchored else name):
                result = not p.negate
        return result


def _read_gitignore(directory: str) -> GitignoreRules | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8",
                  errors="replace") as fh:
            rules = GitignoreRules(directory, fh)
    except OSError:
        return None
    return rules if rules.patterns else None


def _git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _ignored(stack: list[GitignoreRules], path: str, is_dir: bool) -> bool:
    for rules in reversed(stack):  # the deepest .gitignore decides first
        rel = os.path.relpath(path, rules.base).replace(os.sep, "/")
        verdict = rules.match(rel, is_dir=is_dir)
        if verdict is not None:
            return verdict
    return False


def _is_venv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def _walk(top: str, config: LintConfig, stack: list[GitignoreRules], out: list[str]) -> None:
    use_git = config.respect_gitignore
    pushed = False
    if use_git:
        rules = _read_gitignore(top)
        if rules is not None:
            stack.append(rules)
            pushed = True
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        path = os.path.join(top, entry.name) if top != "." else entry.name
        try:  # symlinked directories are not followed (no loops, no escaping the tree)
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file()
        except OSError:
            continue
        if is_dir:
            if ((entry.name in SKIP_DIRS and not (entry.name in _OUTPUT_DIRS and os.path.isfile(
                    os.path.join(path, "__init__.py"))))
                    or entry.name.endswith(".egg-info")
                    or _is_venv(path) or config.is_excluded(path)
                    or (use_git and _ignored(stack, path, True))):
                continue
            _walk(path, config, stack, out)
        elif is_file and entry.name.endswith(LINTED_SUFFIXES):
            if config.is_excluded(path) or (use_git and _ignored(stack, path, False)):
                continue
            out.append(path)
    if pushed:
        stack.pop()


def _real_file(path: str, real_dirs: dict[str, str]) -> str:
    """``os.path.realpath(path)`` for a file :func:`_walk` found (no symlinked directory is
    followed below the top): its directory's real path, resolved once per directory, joined
    to its name, unless the file itself is a link."""
    if os.path.islink(path):
        return os.path.realpath(path)
    head, tail = os.path.split(path)
    real = real_dirs.get(head)
    if real is None:
        real = real_dirs[head] = os.path.realpath(head or ".")
    return os.path.join(real, tail)


def _git_check_ignore(files: list[str]) -> set[str]:
    """Return the members of ``files`` that git ignores (empty when git is unusable)."""
    git = shutil.which("git")
    if git is None or not files:
        return set()
    groups: dict[Path, list[str]] = {}
    for f in files:
        root = _git_root(Path(f).absolute().parent)
        if root is not None:
            groups.setdefault(root, []).append(f)
    ignored: set[str] = set()
    for root, members in groups.items():
        absolute = {str(Path(m).absolute()): m for m in members}
        try:
            proc = subprocess.run(
                [git, "-C", str(root), "check-ignore", "--stdin", "-z"],
                input="\0".join(absolute).encode() + b"\0", capture_output=True,
                timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode not in (0, 1):  # 128: not a work tree, odd paths...
            continue
        for item in proc.stdout.decode(errors="replace").split("\0"):
            if item in absolute:
                ignored.add(absolute[item])
            elif item:
                full = str((root / item).absolute())
                if full in absolute:
                    ignored.add(absolute[full])
    return ignored


def discover(paths: Iterable[str], config: LintConfig | None = None
             ) -> tuple[list[str], list[Violation]]:
    """Expand files and directories into the list of files to lint.

    Args:
        paths: files and directories as the user named them.
        config: settings (``exclude``, ``respect_gitignore``); defaults when ``None``.

    Returns:
        ``(files, problems)``: files in a stable order, each real file once (paths keep the
        user's spelling, joined with what the walk found), and an ``E902`` diagnostic for
        each named path that does not exist.
    """
    config = config or LintConfig()
    files: list[str] = []
    problems: list[Violation] = []
    seen: set[str] = set()
    for raw in paths:
        path = os.path.normpath(raw) if raw not in ("", ".") else "."
        if os.path.isdir(path):
            found: list[str] = []
            stack: list[GitignoreRules] = []
            if config.respect_gitignore:
                absdir = Path(path).absolute()
                root = _git_root(absdir)
                if root is not None and root != absdir:
                    for parent in reversed([p for p in absdir.parents
                                            if p == root or root in p.parents]):
                        rules = _read_gitignore(str(parent))
                        if rules is not None:
                            rules.base = os.path.relpath(parent)
                            stack.append(rules)
            _walk(path, config, stack, found)
            if config.respect_gitignore and not _git_check_ignore([path]):
                # a directory named on purpose is linted even if git ignores it
                drop = _git_check_ignore(found)
                found = [f for f in found if f not in drop]
            real_dirs: dict[str, str] = {}
            for f in found:
                key = _real_file(f, real_dirs)
                if key not in seen:
                    seen.add(key)
                    files.append(f)
        elif os.path.exists(path) and not os.path.isfile(path):
            problems.append(io_error(raw, "not a regular file (device, socket or pipe)"))
        elif os.path.exists(path):
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                files.append(raw)
        else:
            problems.append(io_error(raw, "No such file or directory"))
    return files, problems
