"""``lint_source`` frees a file's tree and analysis when it returns, by reference counting:
no reference cycle is left for the cyclic collector (which used to find every file's whole
tree in cycles and spent about a tenth of a lint run collecting them)."""

from __future__ import annotations

import gc
from pathlib import Path

from torchmem.lint.context import Context
from torchmem.lint.engine import lint_source
from torchmem.lint.facts import FunctionFacts
from torchmem.lint.summaries import Summaries
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
