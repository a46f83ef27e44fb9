"""The rule registry: metadata, documentation, fixtures, generated docs, no torch import."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchmem.errors import UsageError
from torchmem.lint import lint_source
from torchmem.lint.docs import generate
from torchmem.lint.registry import DOC_SECTIONS, RULES, _load, resolve_codes, select_rules

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
ALL = _load()
_FENCE = re.compile(r"```python\n(.*?)```", re.S)
_PRELUDE = "import gc\nimport torch\nfrom torch.utils.data import DataLoader\n"


def test_codes_names_and_metadata():
    assert len(ALL) >= 15
    names = [r.name for r in ALL.values()]
    assert len(set(names)) == len(names)
    for code, rule in ALL.items():
        assert re.fullmatch(r"TMM[1-9][0-9]{2}", code) and rule.code == code
        assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", rule.name)
        assert rule.summary and "\n" not in rule.summary
        assert (rule.fix_title is None) == (rule.fix_safety is None)
        assert rule.fix_safety in (None, "safe", "unsafe")
        assert rule.category in ("memory", "correctness", "hygiene", "performance"), code
        assert rule.default_enabled == (rule.category in ("memory", "correctness")
                                        and not rule.trial), code
        assert rule.category != "performance" or code.startswith("TMM9"), code
    assert "TMM000" not in ALL  # reserved for internal errors reported by lint_paths


@pytest.mark.parametrize("code", sorted(ALL))
def test_docstring_sections(code):
    sections = ALL[code].doc_sections()
    for name in DOC_SECTIONS:
        assert sections.get(name, "").strip(), f"{code}: missing section {name}"
    assert _FENCE.search(sections["Example"]), f"{code}: Example needs a python block"
    assert _FENCE.search(sections["Use instead"]), f"{code}: Use instead needs a python block"


@pytest.mark.parametrize("code", sorted(ALL))
def test_documented_example_is_flagged_and_its_fix_is_not(code):
    sections = ALL[code].doc_sections()
    bad = _PRELUDE + _FENCE.search(sections["Example"]).group(1)
    good = _PRELUDE + _FENCE.search(sections["Use instead"]).group(1)
    assert [v for v in lint_source(bad, select=[code])], f"{code}: its own Example is silent"
    assert not lint_source(good, select=[code]), f"{code}: its own 'Use instead' is flagged"


def test_every_rule_has_a_fixture_with_bad_and_good_code():
    expected: set[str] = set()
    for path in FIXTURES.glob("TMM*.py"):
        text = path.read_text(encoding="utf-8")
        expected |= set(re.findall(r"#\s*expect:.*?(TMM\d{3})", text))
        expected |= {c for line in text.splitlines() if "# expect:" in line
                     for c in re.findall(r"TMM\d{3}", line.partition("# expect:")[2])}
        assert re.search(r"^def good|^    def good|^class .*:\n(?:.*\n)*?    def good", text,
                         re.M), f"{path.name} has no good example"
    assert set(ALL) <= expected, f"rules without a flagged fixture line: {set(ALL) - expected}"


def test_docs_pages_are_up_to_date():
    pages = generate()
    docs = ROOT / "docs" / "lint"
    for name, text in pages.items():
        path = docs / name
        assert path.is_file(), f"docs/lint/{name} missing; run python scripts/gen_lint_docs.py"
        assert path.read_text(encoding="utf-8") == text, (
            f"docs/lint/{name} is out of date; run python scripts/gen_lint_docs.py")
    for code, rule in ALL.items():
        assert any(f"## {code} {rule.name}" in t for t in pages.values())


def test_selection():
    default = {r.code for r in select_rules()}
    assert default == {c for c, r in ALL.items() if r.default_enabled}
    assert {r.code for r in select_rules(["TMM"])} == default
    assert {r.code for r in select_rules(["ALL"])} == set(ALL)
    assert {r.code for r in select_rules(["TMM9"])} == {c for c in ALL if c.startswith("TMM9")}
    assert [r.code for r in select_rules(["TMM1"], ["TMM102"])] == ["TMM101", "TMM103", "TMM104",
                                                                  "TMM105", "TMM106", "TMM107",
                                                                  "TMM108", "TMM109", "TMM110",
                                                                  "TMM111", "TMM112", "TMM113", "TMM114",
                                                                  "TMM115", "TMM116", "TMM117"]
    assert "TMM106" not in default and ALL["TMM106"].trial  # a memory rule on trial: opt-in
    assert "TMM107" not in default and ALL["TMM107"].trial
    assert "TMM108" not in default and ALL["TMM108"].trial
    assert "TMM109" not in default and ALL["TMM109"].trial
    assert "TMM111" not in default and ALL["TMM111"].trial
    assert {"TMM110", "TMM112", "TMM113", "TMM114", "TMM115"} <= default
    assert resolve_codes(["graph-accumulation"]) == {"TMM101"}
    with pytest.raises(UsageError, match="TMM777"):
        select_rules(["TMM777"])
    assert RULES is ALL


def test_importing_the_linter_does_not_import_torch():
    code = ("import sys\n"
            "from torchmem.lint.registry import RULES as R\n"
            "assert len(R) >= 18, 'RULES must be complete on import'\n"
            "import torchmem.lint\n"
            "from torchmem.lint import lint_source, RULES\n"
            "lint_source('import torch\\nx = torch.ones(1)\\ny = x.data\\n')\n"
            "from torchmem.lint.docs import generate; generate()\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "assert 'libcst' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_seed_claim_del_before_backward_is_harmless():
    """A guide calls ``del outputs`` before ``loss.backward()`` an error; PyTorch disagrees."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, t = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])

    def grads(delete: bool) -> list:
        model.zero_grad()
        outputs = model(x)
        loss = torch.nn.functional.cross_entropy(outputs, t)
        if delete:
            del outputs
        loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    for a, b in zip(grads(False), grads(True)):
        assert torch.equal(a, b)


def test_seed_claim_missing_zero_grad_does_not_grow_memory():
    """Gradients accumulate in place: the memory of ``.grad`` stays the same (TMM501's docs)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(64, 64)
    ptrs = []
    for _ in range(3):
        model(torch.randn(8, 64)).sum().backward()
        ptrs.append(model.weight.grad.untyped_storage().data_ptr())
    assert len(set(ptrs)) == 1  # the same storage, updated in place


def test_leaf_inplace_really_raises():
    """TMM403's message quotes PyTorch's error; check that PyTorch does raise it."""
    torch = pytest.importorskip("torch")
    w = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.add_(1.0)
    with torch.no_grad():
        w.add_(1.0)


def test_docstring_examples_of_the_engine_modules():
    import doctest

    import torchmem.lint
    from torchmem.lint import docs, engine, registry, violation

    for module in (torchmem.lint, violation, engine, registry, docs):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
