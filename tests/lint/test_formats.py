"""Output formats: ruff-like text, JSON that round-trips, SARIF 2.1.0, statistics, explain."""

from __future__ import annotations

import json
import re

import pytest

from torchmem.errors import UsageError
from torchmem.lint.files import LintResult
from torchmem.lint.formats import (
    format_explain,
    format_json,
    format_rule_list,
    format_sarif,
    format_statistics,
    format_text,
    format_violation,
)
from torchmem.lint.registry import DOC_SECTIONS, RULES, _load
from torchmem.lint.violation import Edit, Fix, Violation

_load()
V1 = Violation("src/a b.py", 3, 4, 3, 10, "TMM401", "tensor-data", "`.data` bypasses autograd",
               Fix("Use .detach()", "unsafe", (Edit(3, 6, 3, 10, "detach()"),)))
V2 = Violation("src/a b.py", 9, 0, 9, 12, "TMM101", "graph-accumulation", "keeps the graph")
V3 = Violation("z.py", 1, 0, 1, 1, "TMM403", "storage", "deprecated",
               Fix("Use .untyped_storage()", "safe", (Edit(1, 0, 1, 1, "x"),)))
ERR = Violation("bad.py", 2, 5, 2, 5, "E999", "syntax-error", "not valid Python: invalid syntax")
RESULT = LintResult(violations=(V1, V2, V3), errors=(ERR,), files=4, lines=120)


def test_violation_line_is_ruff_like_with_one_based_column():
    assert format_violation(V2) == "src/a b.py:9:1: TMM101 keeps the graph"
    assert format_violation(V3) == "z.py:1:1: TMM403 [*] deprecated"
    assert format_violation(V1) == "src/a b.py:3:5: TMM401 `.data` bypasses autograd"


def test_text_lists_everything_in_order_then_a_summary():
    text = format_text(RESULT)
    lines = text.splitlines()
    assert lines[:4] == [
        "bad.py:2:6: E999 not valid Python: invalid syntax",
        "src/a b.py:3:5: TMM401 `.data` bypasses autograd",
        "src/a b.py:9:1: TMM101 keeps the graph",
        "z.py:1:1: TMM403 [*] deprecated",
    ]
    assert "Found 3 violations in 2 files (4 files, 120 lines checked)." in text
    assert "[*] 1 fixable with --fix; 1 more with --fix --unsafe-fixes" in text
    assert "1 file could not be linted" in text
    assert "\x1b[" not in text
    assert "\x1b[" in format_text(RESULT, color=True)


def test_text_when_clean():
    assert format_text(LintResult(files=2, lines=10)) == "All checks passed! (2 files, 10 lines)"


def test_json_round_trips_violations():
    doc = json.loads(format_json(RESULT))
    assert doc["schema_version"] == 1
    assert doc["summary"] == {"files": 4, "lines": 120, "violations": 3, "errors": 1,
                              "fixed": 0}
    assert [Violation.from_dict(d) for d in doc["violations"]] == [V1, V2, V3]
    assert doc["violations"][0]["column"] == 5
    assert Violation.from_dict(doc["errors"][0]) == ERR


# A schema written from the SARIF 2.1.0 specification (OASIS), limited to the objects
# torchmem emits; checked with jsonschema when it is installed, by hand otherwise.
_POS = {"type": "integer", "minimum": 1}
_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
            "properties": {"text": {"type": "string"}}}
_REGION = {"type": "object", "properties": {"startLine": _POS, "startColumn": _POS,
                                            "endLine": _POS, "endColumn": _POS}}
_ARTIFACT = {"type": "object", "properties": {"uri": {"type": "string"},
                                              "uriBaseId": {"type": "string"}}}
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string"},
        "runs": {"type": "array", "items": {
            "type": "object", "required": ["tool"],
            "properties": {
                "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                "tool": {"type": "object", "required": ["driver"], "properties": {
                    "driver": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"}, "version": {"type": "string"},
                        "informationUri": {"type": "string"},
                        "rules": {"type": "array", "items": {
                            "type": "object", "required": ["id"],
                            "properties": {"id": {"type": "string"},
                                           "shortDescription": _MESSAGE,
                                           "fullDescription": _MESSAGE,
                                           "defaultConfiguration": {"type": "object", "properties": {
                                               "level": {"enum": ["none", "note", "warning",
                                                                  "error"]}}}}}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"},
                        "ruleIndex": {"type": "integer", "minimum": 0},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": _MESSAGE,
                        "locations": {"type": "array", "items": {"type": "object", "properties": {
                            "physicalLocation": {"type": "object", "properties": {
                                "artifactLocation": _ARTIFACT, "region": _REGION}}}}},
                        "fixes": {"type": "array", "items": {
                            "type": "object", "required": ["artifactChanges"],
                            "properties": {"description": _MESSAGE, "artifactChanges": {
                                "type": "array", "minItems": 1, "items": {
                                    "type": "object",
                                    "required": ["artifactLocation", "replacements"],
                                    "properties": {"replacements": {"type": "array", "items": {
                                        "type": "object", "required": ["deletedRegion"],
                                        "properties": {"deletedRegion": _REGION}}}}}}}}},
                    }}},
            }}},
    },
}


def test_sarif_log_is_valid_2_1_0():
    log = json.loads(format_sarif(RESULT, version="0.1.0"))
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        jsonschema.validate(log, SARIF_SUBSET)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "torchmem"
    assert [r["id"] for r in rules] == sorted({"TMM401", "TMM101", "TMM403", "E999"})
    results = run["results"]
    assert len(results) == 4
    for res in results:  # ruleIndex points at the rule with the same id
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) > (region["startLine"],
                                                           region["startColumn"])
    by_id = {r["ruleId"]: r for r in results}
    assert by_id["E999"]["level"] == "error" and by_id["TMM101"]["level"] == "warning"
    loc = by_id["TMM401"]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "src/a%20b.py"
    assert loc["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 11}
    rep = by_id["TMM401"]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert rep == {"deletedRegion": {"startLine": 3, "startColumn": 7, "endLine": 3,
                                     "endColumn": 11}, "insertedContent": {"text": "detach()"}}


def test_statistics_counts_per_rule_most_frequent_first():
    table = format_statistics([V1, V2, V2, V3])
    assert table.splitlines()[0].split() == ["2", "TMM101", "graph-accumulation"]
    assert "1  TMM401  [-] tensor-data" in table  # an unsafe fix: --fix alone skips it
    assert "1  TMM403  [*] storage" in table
    # an unsafe fix stays marked as one with --unsafe-fixes: [*] promises a safe fix
    assert "1  TMM401  [-] tensor-data" in format_statistics([V1, V2], unsafe=True)
    assert format_statistics([]) == ""


@pytest.mark.skipif(not RULES, reason="no rules registered")
def test_explain_prints_every_section_of_every_rule():
    for code, rule in RULES.items():
        text = format_explain(code)
        assert text.startswith(f"# {code} {rule.name}\n")
        for section in DOC_SECTIONS:
            assert f"## {section}\n" in text, (code, section)
        assert format_explain(rule.name) == text  # by name too
    listing = format_rule_list()
    assert all(re.search(rf"^{c}\s", listing, re.MULTILINE) for c in RULES)


def test_explain_unknown_code_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown rule 'TMM9999'"):
        format_explain("TMM9999")
