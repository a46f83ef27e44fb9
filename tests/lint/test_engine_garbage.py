"""``lint_source`` frees a file's tree and analysis when it returns, by reference counting:
no reference cycle is left for the cyclic collector (which used to find every file's whole
tree in cycles and spent about a tenth of a lint run collecting them)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from torchmem.lint.context import Context
from torchmem.lint.engine import fewer_collections, lint_source
from torchmem.lint.facts import FunctionFacts
from torchmem.lint.summaries import Summaries
from torchmem.lint.violation import LintSyntaxError
from torchmem.lint.walker import Walker

FIXTURES = Path(__file__).parent / "fixtures"


def test_linting_leaves_no_cyclic_garbage():
    sources = sorted(FIXTURES.rglob("*.py"))
    assert len(sources) > 10
    lint_source("x = 1\n")  # rules registered, tables built
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for path in sources:
            lint_source(path.read_text(encoding="utf-8"), str(path), select=["ALL"])
        gc.collect()
        kinds = (Context, Walker, Summaries, FunctionFacts)
        left = [type(o).__name__ for o in gc.garbage if isinstance(o, kinds)]
        functions = [o.__qualname__ for o in gc.garbage if type(o).__name__ == "function"
                     and o.__module__.startswith("torchmem")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert left == [] and functions == []


def test_linting_raises_the_collector_thresholds_and_restores_the_callers():
    # lint_source raises the collector's thresholds while it runs (it frees its own objects
    # by reference counting); a program that calls it keeps its own settings, including
    # the "automatic collection off" threshold and after a file that does not parse
    before = gc.get_threshold()
    try:
        gc.set_threshold(321, 7, 9)
        with fewer_collections():
            assert gc.get_threshold()[0] > 10_000
        assert gc.get_threshold() == (321, 7, 9)
        lint_source("import torch\nfor x in loader:\n    total += model(x).sum()\n",
                    select=["ALL"])
        assert gc.get_threshold() == (321, 7, 9)
        with pytest.raises(LintSyntaxError):
            lint_source("def f(:\n")
        assert gc.get_threshold() == (321, 7, 9)
        gc.set_threshold(0, 7, 9)
        with fewer_collections():
            assert gc.get_threshold() == (0, 7, 9)
        lint_source("x = 1\n")
        assert gc.get_threshold() == (0, 7, 9)
    finally:
        gc.set_threshold(*before)
