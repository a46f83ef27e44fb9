"""Linter configuration: ``[tool.torchmem.lint]`` in the nearest ``pyproject.toml``.

Keys (all optional; kebab-case as in the file, snake_case also accepted):

- ``select``: codes, prefixes or ``ALL`` to enable instead of the default set.
- ``extend-select``: codes added to ``select`` (e.g. opinionated ``TMM9xx`` rules).
- ``ignore``: codes or prefixes to disable (wins over ``select``).
- ``exclude``: glob patterns of files/directories never linted (replaces nothing; adds to
  the built-in skips such as ``.git``, virtualenvs, ``build``).
- ``per-file-ignores``: ``{glob: [codes]}``; globs are relative to the directory of the
  ``pyproject.toml`` (a glob without ``/`` also matches a file's basename).
- ``respect-gitignore``: ``false`` to lint files that ``.gitignore`` ignores.

Example:
    .. code-block:: toml

        [tool.torchmem.lint]
        extend-select = ["TMM901"]
        ignore = ["TMM402"]
        exclude = ["third_party/**"]
        per-file-ignores = { "tests/**" = ["TMM101"] }

Known limitations:
    Only the nearest ``pyproject.toml`` that has a ``[tool.torchmem.lint]`` table is read
    (no inheritance between nested projects). On Python 3.10 reading TOML needs the
    ``tomli`` package.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torchmem.errors import UsageError
from torchmem.model._serde import Record

__all__ = ["LintConfig", "find_config_file", "glob_to_regex", "load_config", "parse_config"]

_KEYS = {"select", "extend-select", "ignore", "exclude", "per-file-ignores",
         "respect-gitignore"}


@dataclass(frozen=True)
class LintConfig(Record):
    """The effective linter settings.

    Attributes:
        select: codes/prefixes to enable instead of the default set (``None``: defaults).
        extend_select: codes/prefixes enabled on top of ``select``.
        ignore: codes/prefixes to disable; wins over ``select``.
        exclude: glob patterns of paths never linted during discovery.
        per_file_ignores: ``(glob, codes)`` pairs, globs relative to ``root``.
        respect_gitignore: skip what ``.gitignore`` ignores during discovery.
        root: directory that relative globs refer to (the ``pyproject.toml``'s directory).
        source: the file the settings came from, or ``None``.
    """

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    respect_gitignore: bool = True
    root: str = "."
    source: str | None = None

    def effective_select(self) -> list[str] | None:
        """``select`` plus ``extend_select`` in the form :func:`select_rules` takes."""
        if not self.extend_select:
            return None if self.select is None else list(self.select)
        base = list(self.select) if self.select is not None else ["TMM"]
        return base + list(self.extend_select)

    def merged(self, *, select: Iterable[str] | None = None,
               extend_select: Iterable[str] = (), ignore: Iterable[str] = (),
               exclude: Iterable[str] = (), respect_gitignore: bool | None = None
               ) -> LintConfig:
        """Return these settings overridden by command-line options.

        A command-line ``select`` replaces the file's; ``extend_select``, ``ignore`` and
        ``exclude`` add to it.
        """
        return replace(
            self,
            select=tuple(select) if select is not None else self.select,
            extend_select=self.extend_select + tuple(extend_select),
            ignore=self.ignore + tuple(ignore),
            exclude=self.exclude + tuple(exclude),
            respect_gitignore=(self.respect_gitignore if respect_gitignore is None
                               else respect_gitignore),
        )

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """Codes that ``per-file-ignores`` disables for ``path``."""
        if not self.per_file_ignores:
            return ()
        rel = _relative(path, self.root)
        base = posixpath.basename(rel)
        out: list[str] = []
        for pattern, codes in self.per_file_ignores:
            rx = glob_to_regex(pattern)
            if rx.match(rel) or ("/" not in pattern.rstrip("/") and rx.match(base)):
                out.extend(codes)
        return tuple(out)

    def is_excluded(self, path: str) -> bool:
        """Whether ``path`` (file or directory) matches an ``exclude`` pattern."""
        if not self.exclude:
            return False
        rel = _relative(path, self.root)
        base = posixpath.basename(rel)
        for pattern in self.exclude:
            rx = glob_to_regex(pattern.rstrip("/"))
            if rx.match(rel) or fnmatch.fnmatchcase(base, pattern.rstrip("/")):
                return True
        return False


def _relative(path: str, root: str) -> str:
    p = Path(path).absolute()
    try:
        rel = p.relative_to(Path(root).absolute())
    except ValueError:
        rel = p
    return rel.as_posix()


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a gitignore-style glob (``*``, ``?``, ``[...]``, ``**``) to a regex.

    ``*`` does not cross ``/``; ``**`` does. A pattern matches a path or any of its
    parent directories' contents (``build`` matches ``build/x.py``).
    """
    cached = _GLOB_CACHE.get(pattern)
    if cached is not None:
        return cached
    pat = pattern.lstrip("/")
    pat = pat.removeprefix("./")
    i, out = 0, []
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pat.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pat[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    rx = re.compile("(?:" + "".join(out) + ")(?:/.*)?$")
    _GLOB_CACHE[pattern] = rx
    return rx


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ModuleNotFoundError:
            raise UsageError(
                f"cannot read {path}: Python {_pyver()} has no TOML parser; expected the "
                "'tomli' package to be installed",
                tip="pip install tomli, or pass --isolated to ignore pyproject.toml") from None
    try:
        with open(path, "rb") as fh:
            return dict(tomllib.load(fh))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # tomllib.TOMLDecodeError
        raise UsageError(f"{path} is not valid TOML; {exc}",
                         tip="fix the file, or pass --isolated to ignore it") from None


def _pyver() -> str:
    import sys

    return ".".join(map(str, sys.version_info[:2]))


def _section(data: dict[str, Any]) -> dict[str, Any] | None:
    tool = data.get("tool")
    if not isinstance(tool, dict):
        return None
    tm = tool.get("torchmem")
    if not isinstance(tm, dict):
        return None
    section = tm.get("lint")
    return section if isinstance(section, dict) else None


def find_config_file(start: str | Path) -> Path | None:
    """Return the nearest ``pyproject.toml`` at or above ``start`` with our table.

    Files without a ``[tool.torchmem.lint]`` table are skipped, so a sub-package's
    ``pyproject.toml`` does not hide the project's settings.
    """
    here = Path(start).absolute()
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "torchmem" in text and _section(_load_toml(candidate)) is not None:
                return candidate
    return None


def _str_list(value: Any, key: str, source: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(
            f"{source}: [tool.torchmem.lint] {key} must be a list of strings; "
            f"got {value!r}", tip="e.g. ignore = [\"TMM402\"]")
    return tuple(value)


def parse_config(section: dict[str, Any], *, root: str = ".",
                 source: str = "pyproject.toml") -> LintConfig:
    """Validate a ``[tool.torchmem.lint]`` table and build a :class:`LintConfig`.

    Raises:
        UsageError: an unknown key or a value of the wrong type.
    """
    norm: dict[str, Any] = {}
    for key, value in section.items():
        k = key.replace("_", "-")
        if k not in _KEYS:
            raise UsageError(
                f"{source}: unknown key {key!r} in [tool.torchmem.lint]; expected one of "
                f"{', '.join(sorted(_KEYS))}", tip="see docs/lint.md, 'Configuration'")
        norm[k] = value
    pfi = norm.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise UsageError(f"{source}: per-file-ignores must be a table of glob = [codes]; "
                         f"got {pfi!r}")
    respect = norm.get("respect-gitignore", True)
    if not isinstance(respect, bool):
        raise UsageError(f"{source}: respect-gitignore must be true or false; got {respect!r}")
    return LintConfig(
        select=_str_list(norm["select"], "select", source) if "select" in norm else None,
        extend_select=_str_list(norm.get("extend-select", []), "extend-select", source),
        ignore=_str_list(norm.get("ignore", []), "ignore", source),
        exclude=_str_list(norm.get("exclude", []), "exclude", source),
        per_file_ignores=tuple(
            (glob, _str_list(codes, f"per-file-ignores[{glob!r}]", source))
            for glob, codes in pfi.items()),
        respect_gitignore=respect,
        root=root,
        source=source,
    )


def load_config(start: str | Path = ".", *, config_file: str | Path | None = None,
                isolated: bool = False) -> LintConfig:
    """Load the settings that apply to ``start``.

    Args:
        start: a file or directory; the search walks up from it.
        config_file: read this ``pyproject.toml`` (or a TOML file with the same table,
            or a bare ``[tool.torchmem.lint]``-less table of keys) instead of searching.
        isolated: ignore every configuration file and use the defaults.

    Returns:
        The settings; defaults (``LintConfig(root=cwd)``) when no file applies.

    Raises:
        UsageError: the file is unreadable, not TOML, or has bad keys/values.
    """
    if isolated:
        return LintConfig(root=str(Path.cwd()))
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise UsageError(f"--config: no such file {str(path)!r}; expected a pyproject.toml")
        data = _load_toml(path)
        section = _section(data)
        if section is None:
            section = {k: v for k, v in data.items() if k != "tool"}
        return parse_config(section, root=str(path.absolute().parent), source=str(path))
    found = find_config_file(start)
    if found is None:
        return LintConfig(root=str(Path.cwd()))
    section = _section(_load_toml(found)) or {}
    return parse_config(section, root=str(found.parent), source=str(found))

