"""flake8 plugin: report torchmem's ``TMM`` rules through flake8.

Registered as the ``TMM`` entry point of ``flake8.extension``; installing torchmem makes
``flake8`` report ``TMM1xx``... next to its own codes. flake8's ``--select``,
``--extend-ignore``, ``per-file-ignores`` and ``# noqa`` apply as usual.

Which rules run: the default set, or the ``[tool.torchmem.lint]`` selection of the
nearest ``pyproject.toml``, or ``--torchmem-select`` (``torchmem-select`` in the flake8
configuration) when given. The hygiene (``TMM401``, ``TMM402``, ``TMM404``) and
opinionated ``TMM9xx`` rules are off unless selected there (flake8's own ``--select`` can
only narrow what the plugin reports).

Example:
    .. code-block:: ini

        # setup.cfg / tox.ini / .flake8
        [flake8]
        torchmem-select = TMM,TMM901

Known limitations:
    flake8 hands the plugin a parsed tree, but the linter parses the file again from its
    lines (the engine needs positions in characters and its own data flow), so torchmem
    through flake8 costs one extra parse per file compared with ``torchmem lint``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

__all__ = ["TorchmemFlake8"]


@functools.lru_cache(maxsize=64)
def _config_for(directory: str) -> Any:
    from torchmem.errors import TorchmemError
    from torchmem.lint.config import LintConfig, load_config

    try:
        return load_config(directory)
    except TorchmemError:
        return LintConfig()


class TorchmemFlake8:
    """The flake8 checker class (``tree`` plugin).

    Args:
        tree: the module's ``ast`` (unused: the engine parses ``lines`` itself).
        filename: the file flake8 is checking.
        lines: its physical lines, as flake8 decoded them.
    """

    name = "torchmem"
    version: ClassVar[str] = ""
    select: ClassVar[list[str] | None] = None

    def __init__(self, tree: Any, filename: str, lines: Sequence[str]) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, parser: Any) -> None:
        """Register ``--torchmem-select`` (also read from flake8 configuration files)."""
        parser.add_option(
            "--torchmem-select", default=None, parse_from_config=True,
            comma_separated_list=True,
            help="torchmem rules to run (codes/prefixes; default: [tool.torchmem.lint] in "
                 "pyproject.toml, else the default set). Example: TMM,TMM901")

    @classmethod
    def parse_options(cls, options: Any) -> None:
        """Keep the ``--torchmem-select`` value for every checker instance."""
        value = getattr(options, "torchmem_select", None)
        cls.select = list(value) if value else None

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        """Yield ``(line, col, "TMMxxx message", type)`` for each violation."""
        from torchmem.errors import UsageError
        from torchmem.lint.engine import lint_source
        from torchmem.lint.violation import LintSyntaxError

        text = "".join(self.lines)
        if self.select is not None:
            select: list[str] | None = self.select
            ignore: list[str] = []
        else:
            directory = os.path.dirname(os.path.abspath(self.filename)) if \
                self.filename not in ("stdin", "-", "") else os.getcwd()
            config = _config_for(directory)
            select = config.effective_select()
            ignore = [*config.ignore, *config.ignored_for(self.filename)]
        try:
            found = lint_source(text, self.filename, select=select, ignore=ignore or None)
        except LintSyntaxError:  # flake8 reports syntax errors itself (E999)
            return
        except UsageError as exc:  # an unknown code in the selection: say so, visibly
            yield 1, 0, f"TMM000 torchmem configuration error: {exc.message}", type(self)
            return
        for v in found:
            yield v.line, v.col, f"{v.code} {v.message}", type(self)


def _version() -> str:
    from torchmem import __version__

    return __version__


TorchmemFlake8.version = _version()
