"""``benchmarks/lint_doctor_corpora.py`` on a small corpus built here: what counts as caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

LEAKY = '''import torch


def train(model, loader, optimizer):
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
'''

HEALTHY = LEAKY.replace("losses.append(loss)", "losses.append(loss.item())")


@pytest.fixture(scope="module")
def ldc(load_benchmark):
    return load_benchmark("lint_doctor_corpora")


def _corpus(tmp_path: Path, leak_line: int) -> Path:
    corpus = tmp_path / "doctor_corpus_tiny"
    corpus.mkdir()
    (corpus / "leaky.py").write_text(LEAKY)
    (corpus / "healthy_leaky.py").write_text(HEALTHY)
    manifest = {"format": 1, "about": "test", "scripts": [
        {"script": "leaky.py", "cause": "retained_graph", "culprit": ["losses"],
         "line": [leak_line], "fix": {"line": leak_line}},
        {"script": "healthy_leaky.py", "cause": "healthy", "culprit": [], "line": []},
    ]}
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    return corpus


def test_a_finding_on_the_leak_line_is_caught_and_the_healthy_twin_is_silent(ldc, tmp_path):
    corpus = _corpus(tmp_path, leak_line=11)
    leaky, healthy = ldc.score(corpus, "")
    assert leaky.status == "caught" and leaky.codes_at_leak == ["TMM101"]
    assert healthy.status == "silent" and not healthy.findings
    table = ldc.render([leaky, healthy], markdown=True, listing=True)
    assert "| doctor_corpus_tiny | 1 | 1 | 0 | 1/1 (100%) | 1 | 0 | 0 |" in table


def test_a_finding_elsewhere_is_not_caught(ldc, tmp_path):
    corpus = _corpus(tmp_path, leak_line=7)  # the culprit line given is the loss's
    leaky, _ = ldc.score(corpus, "")
    assert leaky.status == "elsewhere" and not leaky.caught
    assert [v["line"] for v in leaky.findings] == [11]


def test_an_unreadable_manifest_is_a_one_line_error(ldc, tmp_path, capsys):
    corpus = tmp_path / "broken"
    corpus.mkdir()
    (corpus / "manifest.json").write_text("{not json")
    assert ldc.main(["--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lint_doctor_corpora: error:") and "\n" not in err
