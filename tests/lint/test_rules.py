"""Every rule against its fixture: bad code flagged on the exact lines, good code silent.

Fixtures live in ``tests/lint/fixtures/TMM*.py``. A trailing ``# expect: TMM101`` (several
codes separated by spaces) marks the line where a violation must start; every other line
must stay silent. A first line ``# select: ALL`` lints with the opinionated rules on;
otherwise the default rule set is used, so the fixtures also check that the rules do not
fire on each other's examples. ``fixtures/constructs/*.py`` are the shapes of real code
the linter once failed on, checked the same way.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from torchmem.lint import lint_source

FIXTURES = Path(__file__).parent / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*((?:TMM\d{3}\s*)+)")
_SELECT = re.compile(r"^#\s*select:\s*(\S+)")


def expectations(text: str) -> Counter[tuple[int, str]]:
    out: Counter[tuple[int, str]] = Counter()
    for lineno, line in enumerate(text.splitlines(), 1):
        match = _EXPECT.search(line)
        if match:
            for code in match.group(1).split():
                out[(lineno, code)] += 1
    return out


def rule_fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("TMM*.py"))


def construct_fixtures() -> list[Path]:
    """Python constructs the linter once failed on (``fixtures/constructs/*.py``)."""
    return sorted((FIXTURES / "constructs").glob("*.py"))


@pytest.mark.parametrize("path", rule_fixtures(), ids=lambda p: p.stem)
def test_fixture(path: Path) -> None:
    check_fixture(path)


@pytest.mark.parametrize("path", construct_fixtures(), ids=lambda p: p.stem)
def test_construct(path: Path) -> None:
    check_fixture(path)


def check_fixture(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    select = _SELECT.match(first)
    found = lint_source(text, str(path), select=[select.group(1)] if select else None)
    got = Counter((v.line, v.code) for v in found)
    want = expectations(text)
    missing = want - got
    extra = got - want
    details = "\n".join(f"  unexpected {v.line}:{v.col + 1} {v.code} {v.message}"
                        for v in found if (v.line, v.code) in extra)
    assert not missing and not extra, (
        f"{path.name}: missing {sorted(missing)}; extra {sorted(extra)}\n{details}")


def test_fixtures_exist() -> None:
    assert rule_fixtures(), "no fixtures found"
    assert construct_fixtures(), "no construct fixtures found"
