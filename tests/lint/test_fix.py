"""The fixer: exact edits, fixed point, syntax check, idempotence, files written faithfully.

Also runs every ``.in.py``/``.out.py`` pair under ``tests/lint/fixtures``.
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import stat
import tokenize
from pathlib import Path

import pytest

from torchmem.lint.config import LintConfig
from torchmem.lint.engine import lint_source
from torchmem.lint.files import lint_paths
from torchmem.lint.fix import apply_edits, fix_source, line_offsets, unified_diff
from torchmem.lint.violation import Edit, Fix, Violation

FIXTURES = Path(__file__).parent / "fixtures"


# --- apply_edits ---------------------------------------------------------------------

def test_replace_insert_delete_in_one_pass():
    text = "a = x.data  # c\nb = f(y)\n"
    edits = [Edit(1, 6, 1, 10, "detach()"), Edit(2, 7, 2, 7, ", z"), Edit(1, 11, 1, 15, "")]
    assert apply_edits(text, edits) == "a = x.detach() \nb = f(y, z)\n"


def test_columns_are_characters_not_bytes():
    text = "s = 'ünïcödé'; y = x.data\n"
    col = text.index("data")
    assert apply_edits(text, [Edit(1, col, 1, col + 4, "detach()")]) == \
        "s = 'ünïcödé'; y = x.detach()\n"


def test_line_endings_follow_the_tokenizer_not_str_splitlines():
    text = "a = 1\r\nb = '\x0c'\rc = x.data\n"  # CRLF, a form feed inside, a lone CR
    assert line_offsets(text) == [0, 7, 15, 26]
    col = "c = x.".__len__()
    assert apply_edits(text, [Edit(3, col, 3, col + 4, "detach()")]).endswith(
        "c = x.detach()\n")


def test_multiline_inserted_text_takes_the_files_newline():
    assert apply_edits("a\r\nb\r\n", [Edit(2, 0, 2, 0, "x\ny\n")]) == "a\r\nx\r\ny\r\nb\r\n"


def test_overlapping_edits_are_refused():
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef\n", [Edit(1, 0, 1, 3, "x"), Edit(1, 2, 1, 4, "y")])


# --- fix_source with a small linter of our own ----------------------------------------

def data_linter(text: str, *, safety: str = "safe", whole_expr: bool = False
                ) -> list[Violation]:
    """Flag ``<expr>.data``; the fix rewrites it to ``<expr>.detach()``."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)

    def char_col(line: int, byte_col: int) -> int:
        return len(lines[line - 1].encode()[:byte_col].decode())

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "data":
            line, end_line = node.lineno, node.end_lineno or node.lineno
            col, end_col = char_col(line, node.col_offset), char_col(end_line, node.end_col_offset or 0)
            if whole_expr:
                inner = ast.get_source_segment(text, node.value) or ""
                edit = Edit(line, col, end_line, end_col, f"{inner}.detach()")
            else:
                edit = Edit(end_line, end_col - 4, end_line, end_col, "detach()")
            out.append(Violation("<t>", line, col, end_line, end_col, "TMM401", "tensor-data",
                                 "`.data` bypasses autograd",
                                 Fix("Use .detach()", safety, (edit,))))  # type: ignore[arg-type]
    return out


def test_fixed_point_handles_nested_overlapping_fixes_over_several_rounds():
    text = "y = x.data.data.data  # keep me\n"
    outcome = fix_source(text, lambda t: data_linter(t, whole_expr=True))
    assert outcome.text == "y = x.detach().detach().detach()  # keep me\n"
    assert outcome.applied == 3
    assert outcome.rounds >= 3  # the outer fix overlaps the inner one: one per round
    assert outcome.violations == []
    again = fix_source(outcome.text, lambda t: data_linter(t, whole_expr=True))
    assert again.text == outcome.text and again.applied == 0  # idempotent


def test_unsafe_fixes_need_opt_in():
    text = "y = x.data\n"
    lint = lambda t: data_linter(t, safety="unsafe")
    assert fix_source(text, lint).text == text
    assert fix_source(text, lint, unsafe=True).text == "y = x.detach()\n"


def test_a_fix_that_breaks_the_syntax_is_dropped_and_others_still_apply():
    def lint(text: str) -> list[Violation]:
        found = data_linter(text)
        if "(((" not in text:  # a broken fix offered at line 1
            bad = Fix("break it", "safe", (Edit(1, 0, 1, 0, "((("),))
            found.insert(0, Violation("<t>", 1, 0, 1, 1, "TMM999", "bad", "bad", bad))
        return found
    outcome = fix_source("a = 1\nb = x.data\n", lint)
    assert outcome.text == "a = 1\nb = x.detach()\n"
    ast.parse(outcome.text)


def test_identical_fixes_from_two_violations_are_applied_once():
    def lint(text: str) -> list[Violation]:
        return data_linter(text) * 2
    assert fix_source("y = x.data\n", lint).text == "y = x.detach()\n"


def test_unified_diff_marks_missing_final_newline():
    diff = unified_diff("a = x.data", "a = x.detach()", "m.py")
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-a = x.data\n\\ No newline at end of file\n" in diff


# --- writing files -------------------------------------------------------------------

def storage_fix_available() -> bool:
    return any(v.fix and v.fix.safety == "safe"
               for v in lint_source("import torch\nt = torch.ones(2)\np = t.storage().data_ptr()\n",
                                   select="TMM402"))


needs_safe_fix = pytest.mark.skipif(not storage_fix_available(),
                                    reason="no rule with a safe fix for .storage()")
STORAGE = "import torch\nt = torch.ones(2)  # café\np = t.storage().data_ptr()  # keep\n"


@needs_safe_fix
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("encoding, header", [
    ("utf-8", b""), ("utf-8-sig", b""), ("latin-1", b"# -*- coding: latin-1 -*-\n")])
def test_fix_writes_back_encoding_newlines_and_mode(tmp_path, newline, encoding, header):
    path = tmp_path / "m.py"
    original = (header + STORAGE.encode(encoding)).replace(b"\n", newline.encode())
    path.write_bytes(original)
    os.chmod(path, 0o751)
    result = lint_paths([str(path)], config=LintConfig(extend_select=("TMM402",)), fix=True)
    assert result.fixed == 1 and result.fixed_files == (str(path),)
    data = path.read_bytes()
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    assert codecs.lookup(enc).name == codecs.lookup(encoding).name
    text = data.decode(enc)
    assert "untyped_storage()" in text and "# keep" in text and "café" in text
    assert newline == "\n" or "\n" not in text.replace("\r\n", "")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o751
    assert sorted(os.listdir(tmp_path)) == ["m.py"]  # no temporary file left behind
    before = path.read_bytes()
    assert lint_paths([str(path)], config=LintConfig(extend_select=("TMM402",)), fix=True).fixed == 0
    assert path.read_bytes() == before  # idempotent


@needs_safe_fix
def test_diff_changes_nothing_and_reports_the_change(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(STORAGE, encoding="utf-8")
    result = lint_paths([str(path)], config=LintConfig(extend_select=("TMM402",)), diff=True)
    assert path.read_text(encoding="utf-8") == STORAGE
    assert result.fixed == 1
    assert "-p = t.storage().data_ptr()  # keep" in result.diffs[0]
    assert "+p = t.untyped_storage().data_ptr()  # keep" in result.diffs[0]


# --- the rules' fix fixtures -----------------------------------------------------------

PAIRS = sorted(FIXTURES.rglob("*.in.py")) if FIXTURES.is_dir() else []


def _fix_all(text: str, unsafe: bool) -> str:
    return fix_source(text, lambda t: lint_source(t, select=["ALL"]), unsafe=unsafe).text


def _comments(text: str) -> list[str]:
    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t.string for t in toks if t.type == tokenize.COMMENT]


@pytest.mark.parametrize("source", PAIRS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fix_fixture_pair(source: Path):
    expected_path = source.with_name(source.name[:-len(".in.py")] + ".out.py")
    assert expected_path.is_file(), f"{source.name} has no .out.py"
    before = source.read_text(encoding="utf-8")
    after = _fix_all(before, unsafe=True)
    assert after == expected_path.read_text(encoding="utf-8")
    assert after != before, "a fix fixture must exercise a fix"
    ast.parse(after)
    assert _fix_all(after, unsafe=True) == after  # idempotent
    for comment in _comments(before):
        assert comment in after, f"comment lost: {comment}"
    safe_path = source.with_name(source.name[:-len(".in.py")] + ".safe.out.py")
    if safe_path.is_file():
        assert _fix_all(before, unsafe=False) == safe_path.read_text(encoding="utf-8")


def test_every_rule_with_a_fix_has_a_fix_fixture():
    from torchmem.lint.registry import _load

    with_fix = {code for code, rule in _load().items() if rule.fix_safety}
    covered = set()
    for pair in PAIRS:
        covered |= {v.code for v in lint_source(pair.read_text(encoding="utf-8"),
                                                 select=["ALL"]) if v.fix}
    assert with_fix <= covered, f"rules whose fix has no .in.py/.out.py: {with_fix - covered}"


# --- fixes only where the value is known to be a tensor --------------------------------
_NOT_TENSORS = '''\
import torch
import torch.nn.functional as F


def train(model, loader, optimizer, device):
    total = 0
    steps, outputs = [], []
    for data in loader:
        data = data.to(device)
        optimizer.zero_grad()
        out = model(data)
        loss = F.cross_entropy(out, data.y)
        loss.backward()
        optimizer.step()
        total += data.num_graphs
        steps.append(data.num_graphs)
        outputs.append(out)
    return total, steps, outputs
'''


def test_unsafe_fixes_never_call_tensor_methods_on_values_of_unknown_type():
    # data.num_graphs is an int of a batch object moved with .to(); a model output may be a
    # tuple or a dict: .detach() on either raises, so no fix may add it
    found = lint_source(_NOT_TENSORS, "t.py")
    assert [(v.line, v.code) for v in found] == [(17, "TMM101")]
    assert found[0].fix is None
    assert "detached copies of the tensors" in found[0].message
    assert _fix_all(_NOT_TENSORS, unsafe=True) == _NOT_TENSORS


def test_advice_names_the_operand_that_carries_the_graph():
    text = ("import torch\n\ndef f(model, loader, opt, criterion):\n    total = 0.0\n"
            "    for x, y in loader:\n        loss = criterion(model(x), y)\n"
            "        loss.backward()\n        opt.step()\n        total += loss * x.size(0)\n")
    (v,) = [v for v in lint_source(text, "t.py") if v.code == "TMM101"]
    assert "add loss.item() (or loss.detach())" in v.message
    assert "x.size(0).item()" not in v.message and "float(" not in v.message
    assert _fix_all(text, unsafe=True).endswith("total += loss.detach() * x.size(0)\n")
