"""The grad mode of callers in other files of the linted tree (whole-tree runs only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchmem.lint.config import LintConfig
from torchmem.lint.files import lint_paths
from torchmem.lint.tree_callers import no_grad_callees

EVALUATE = '''\
import torch


def evaluate(model, loader):
    model.eval()
    outs = []
    for x, y in loader:
        out = model(x)
        outs.append(out)
    return outs
'''

CALLER = '''\
import torch
{imports}


def main(model, loader, dev):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
{call}
'''

UNDER_NO_GRAD = "    with torch.no_grad():\n        {expr}"
#: the finding the helper gets when its grad mode is its own
FINDING = ("utils.py", 9, "TMM103")


def _tree(tmp_path: Path, callers: dict[str, tuple[str, str]],
          helper: str = EVALUATE) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(helper)
    for name, (imports, call) in callers.items():
        (pkg / name).write_text(CALLER.format(imports=imports, call=call))
    return pkg


def _found(*paths: Path) -> set[tuple[str, int, str]]:
    result = lint_paths([str(p) for p in paths], config=LintConfig(), jobs=1)
    assert not result.errors
    return {(Path(v.path).name, v.line, v.code) for v in result.violations}


@pytest.mark.parametrize("imports, expr", [
    ("from pkg.utils import evaluate", "evaluate(model, dev)"),
    ("from .utils import evaluate as run_eval", "run_eval(model, dev)"),
    ("import pkg.utils as u", "u.evaluate(model, dev)"),
])
def test_a_helper_called_only_under_no_grad_from_other_files_is_silent(tmp_path, imports,
                                                                       expr):
    call = UNDER_NO_GRAD.format(expr=expr)
    pkg = _tree(tmp_path, {"train.py": (imports, call), "test.py": (imports, call)})
    assert FINDING not in _found(pkg)
    # linted alone, the helper's callers are unknown: its own grad mode holds
    assert _found(pkg / "utils.py") == {FINDING}
    files = tuple(str(p) for p in pkg.glob("*.py"))
    assert no_grad_callees(str(pkg / "utils.py"), ["evaluate", "main"], files) == {"evaluate"}
    assert no_grad_callees(str(pkg / "train.py"), ["main"], files) == set()


@pytest.mark.parametrize("other", [
    ("from pkg.utils import evaluate", "    evaluate(model, dev)"),  # grad on
    ("from pkg.utils import evaluate",  # a value: called from where we cannot see
     UNDER_NO_GRAD.format(expr="hooks = [evaluate]")),
    ("from pkg.utils import *", UNDER_NO_GRAD.format(expr="evaluate(model, dev)")),
    ("", "    from pkg.utils import evaluate\n    evaluate(model, dev)"),
    ("from pkg.utils import evaluate",  # no_grad ends before the call runs
     UNDER_NO_GRAD.format(expr="step = lambda: evaluate(model, dev)") + "\n    step()"),
])
def test_one_caller_with_grad_on_or_unknown_keeps_the_finding(tmp_path, other):
    call = UNDER_NO_GRAD.format(expr="evaluate(model, dev)")
    pkg = _tree(tmp_path, {"train.py": ("from pkg.utils import evaluate", call),
                           "other.py": other})
    assert FINDING in _found(pkg)


def test_a_call_through_a_re_export_keeps_the_finding(tmp_path):
    call = UNDER_NO_GRAD.format(expr="evaluate(model, dev)")
    pkg = _tree(tmp_path, {"train.py": ("from pkg.utils import evaluate", call)})
    assert FINDING not in _found(pkg)
    (pkg / "__init__.py").write_text("from .utils import evaluate\n")
    (tmp_path / "run.py").write_text(CALLER.format(imports="from pkg import evaluate",
                                                   call="    evaluate(model, dev)"))
    assert FINDING in _found(pkg, tmp_path / "run.py")


def test_a_call_with_grad_on_in_the_helpers_own_file_keeps_the_finding(tmp_path):
    helper = EVALUATE + "\n\ndef report(model, dev):\n    return evaluate(model, dev)\n"
    call = UNDER_NO_GRAD.format(expr="evaluate(model, dev)")
    pkg = _tree(tmp_path, {"train.py": ("from pkg.utils import evaluate", call)}, helper)
    assert FINDING in _found(pkg)


def test_a_same_named_function_of_another_module_is_not_the_helper(tmp_path):
    call = UNDER_NO_GRAD.format(expr="evaluate(model, dev)")
    pkg = _tree(tmp_path, {"train.py": ("from pkg.utils import evaluate", call)})
    (pkg / "metrics.py").write_text(EVALUATE)
    (pkg / "bench.py").write_text(CALLER.format(imports="from pkg.metrics import evaluate",
                                                call="    evaluate(model, dev)"))
    found = _found(pkg)
    assert FINDING not in found and ("metrics.py", 9, "TMM103") in found


def test_a_notebook_of_the_tree_that_names_the_helper_keeps_the_finding(tmp_path):
    call = UNDER_NO_GRAD.format(expr="evaluate(model, dev)")
    pkg = _tree(tmp_path, {"train.py": ("from pkg.utils import evaluate", call)})
    assert FINDING not in _found(pkg)
    (pkg / "explore.ipynb").write_text('{"cells": [{"cell_type": "code", "source": '
                                       '["from pkg.utils import evaluate\\n", '
                                       '"evaluate(model, dev)"]}], "nbformat": 4, '
                                       '"nbformat_minor": 5, "metadata": {}}')
    assert FINDING in _found(pkg)
