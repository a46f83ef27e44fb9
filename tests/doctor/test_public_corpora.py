"""Integrity of the public corpora of real code, not the doctor's score.

``tests/doctor_corpus_public`` (used while the doctor is improved),
``tests/doctor_corpus_holdout`` (held out: it shares no source with the public one),
``tests/doctor_corpus_holdout2`` (held out, scored once before any tuning: it shares no
source with any other corpus), ``tests/doctor_corpus_holdout3`` (held out, built after
the second was used for tuning: it shares no report with any other corpus) and
``tests/doctor_corpus_holdout4`` (held out, built after the third was used for tuning: it
shares no report with any other corpus) and ``tests/doctor_corpus_holdout5`` (held out, built
after the fourth was used for tuning: it shares no report with any other corpus) and
``tests/doctor_corpus_holdout6`` (held out, built after the fifth was scored: it
shares no report with any other corpus) and ``tests/doctor_corpus_holdout7`` (held out, built
after the sixth was scored: it shares no report with any other corpus) and
``tests/doctor_corpus_holdout8`` (held out, built after the seventh was scored: it shares no
report with any other corpus) and ``tests/doctor_corpus_holdout9`` (held out, built after the
eighth was scored: it shares no report with any other corpus) and
``tests/doctor_corpus_holdout10`` (held out, built after the ninth was scored: it shares no
report with any other corpus) and ``tests/doctor_corpus_holdout11`` (held out, built after the
tenth was scored: it shares no report with any other corpus) and
``tests/doctor_corpus_holdout12`` (held out, built after the eleventh: it shares no report
with any other corpus) and ``tests/doctor_corpus_holdout13`` (held out, built after the
twelfth: it shares no report with any other corpus). Every script
there is adapted from a
public report (a GitHub issue or pull request, a forum thread, a repository at a given
commit) and says so in its header. This checks the
manifest and the files only: the manifest is valid and in the main corpus's format, every
listed script exists and compiles, names its source URL in its header, and every expected
line points at code. The scripts are not run here (``python benchmarks/doctor_corpus.py
--corpus DIR`` runs the doctor on them and prints its score).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from torchmem.model.capture import CAUSES

TESTS = Path(__file__).resolve().parents[1]
#: corpus name -> (directory, fewest scripts it must list)
CORPORA = {"public": (TESTS / "doctor_corpus_public", 40),
           "holdout": (TESTS / "doctor_corpus_holdout", 27),
           "holdout2": (TESTS / "doctor_corpus_holdout2", 18),
           "holdout3": (TESTS / "doctor_corpus_holdout3", 20),
           "holdout4": (TESTS / "doctor_corpus_holdout4", 20),
           "holdout5": (TESTS / "doctor_corpus_holdout5", 20),
           "holdout6": (TESTS / "doctor_corpus_holdout6", 24),
           "holdout7": (TESTS / "doctor_corpus_holdout7", 26),
           "holdout8": (TESTS / "doctor_corpus_holdout8", 24),
           "holdout9": (TESTS / "doctor_corpus_holdout9", 24),
           "holdout10": (TESTS / "doctor_corpus_holdout10", 24),
           "holdout11": (TESTS / "doctor_corpus_holdout11", 24),
           "holdout12": (TESTS / "doctor_corpus_holdout12", 26),
           "holdout13": (TESTS / "doctor_corpus_holdout13", 24)}
#: the corpora whose sources come from public reports, and the linter's recall corpora
OTHER_SOURCES = [TESTS / "doctor_corpus",
                 *sorted(p for p in (TESTS.parent / "benchmarks").glob("lint_recall*") if p.is_dir())]
MANIFESTS = {name: json.loads((d / "manifest.json").read_text(encoding="utf-8"))
             for name, (d, _) in CORPORA.items()}
ENTRIES = [(name, e) for name, m in MANIFESTS.items() for e in m["scripts"]]
IDS = [f"{name}/{e['script']}" for name, e in ENTRIES]
URL = re.compile(r"https://(github\.com|discuss\.pytorch\.org|stackoverflow\.com|forums\.)\S+")
FIELDS = {"script", "cause", "culprit", "line", "also", "device", "doctor_args", "script_args",
          "source", "what", "fix", "note"}


def _header(path: Path) -> list[str]:
    """The leading comment block of a script."""
    lines = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.startswith("#"):
            break
        lines.append(text)
    return lines


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_manifest_lists_every_script_once_with_enough_healthy_ones(name):
    corpus, fewest = CORPORA[name]
    manifest = MANIFESTS[name]
    assert manifest["format"] == 1
    entries = manifest["scripts"]
    names = [e["script"] for e in entries]
    assert len(names) == len(set(names))
    assert set(names) == {p.name for p in corpus.glob("*.py")}
    assert len(entries) >= fewest
    healthy = sum(e["cause"] == "healthy" for e in entries)
    assert healthy * 3 >= len(entries)


def test_the_held_out_corpus_shares_no_source_with_the_public_one():
    public, held_out = MANIFESTS["public"]["scripts"], MANIFESTS["holdout"]["scripts"]
    assert not {e["source"] for e in held_out} & {e["source"] for e in public}
    assert not {e["script"] for e in held_out} & {e["script"] for e in public}


def _report(url: str) -> str:
    """The report a URL names (``github.com/o/r/issues/12``, a forum thread), without anchors.

    A GitHub issue or pull request is keyed by the repository's name without its owner (a
    repository moved to another owner keeps its numbers: ``pytorch/botorch`` became
    ``meta-pytorch/botorch``), a commit by its first seven hex digits wherever it is
    linked (a fix commit is the same report under a commit URL or a pull request's)."""
    url = url.split("#")[0].rstrip("/")
    m = re.match(r"https://github\.com/[^/]+/([^/]+)/(issues|pull)/(\d+)", url)
    if m:
        return f"{m[1]}/{m[3]}".lower()
    m = re.match(r"https://github\.com/[^/]+/[^/]+/(?:pull/\d+/)?commits?/([0-9a-f]{7,40})", url)
    if m:
        return f"commit/{m[1][:7]}".lower()
    m = re.match(r"https://discuss\.pytorch\.org/t/[^/]+/(\d+)", url)
    if m:
        return f"discuss/{m[1]}"
    return url.lower()


_CITED = re.compile(r"(?:issues?|PR|pull request|pull)\s*#(\d+)", re.I)


def _cited(directory: Path) -> set[str]:
    """The GitHub issues and pull requests a lint batch's commits cite in their notes
    (``"issue #210"`` in a note of ``flairNLP/flair``'s fix commit): the same bug as a
    report keyed by :func:`_report`, under the commit's URL."""
    found = set()
    for path in directory.rglob("commits.json"):
        for entry in json.loads(path.read_text(encoding="utf-8")):
            repo = entry.get("repo", "").split("/")[-1].lower()
            found |= {f"{repo}/{n}" for n in _CITED.findall(entry.get("note", ""))} if repo \
                else set()
    return found


#: scripts whose report a lint batch cites (the same bug as one of its fix commits), kept
#: with what that means for the scores: -> the lint batch's commit. The doctor was never
#: scored on the lint batches; the linter's scores on these scripts are not blind where the
#: batch came first (the thirteenth corpus's two: the linter was tuned on both commits).
SHARED_WITH_LINT = {
    ("holdout3", "bdpy_feature_extractor_stale_hooks.py"): "bdpy-feature-extractor-remove-hooks",
    ("holdout6", "faster_rcnn_35_summed_epoch_losses.py"): "faster-rcnn-bubbliiiing-loss-item",
    ("holdout6", "dair_pll_20_trajectory_predictions_with_graph.py"):
        "dair-pll-trajectory-predict-detach",
    ("holdout6", "gflownet_133_loss_ema_tensors.py"): "gflownet-ahg-loss-ema-item",
    ("holdout7", "trl_1526_cpo_nll_loss_metric.py"): "trl-cpo-nll-loss-metric-detach",
    ("holdout13", "flair_210_generate_text_hidden_chain.py"): "flair-generate-text-no-grad",
    ("holdout13", "olmo_164_generate_beam_search_scores_graph.py"): "olmo-generate-no-grad",
}


def _urls_in(directory: Path) -> set[str]:
    """Every https URL written in a corpus's scripts, manifests and headers."""
    found = set()
    for path in directory.rglob("*"):
        if path.suffix in (".py", ".json", ".md", ".csv", ".txt") and path.is_file():
            found |= set(re.findall(r"https://[^\s\"'<>)\]]+", path.read_text(encoding="utf-8")))
    return found


#: each later held-out corpus -> the corpora built before it, with which it shares no report
EARLIER = {"holdout2": ("public", "holdout"), "holdout3": ("public", "holdout", "holdout2"),
           "holdout4": ("public", "holdout", "holdout2", "holdout3"),
           "holdout5": ("public", "holdout", "holdout2", "holdout3", "holdout4"),
           "holdout6": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5"),
           "holdout7": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                        "holdout6"),
           "holdout8": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                        "holdout6", "holdout7"),
           "holdout9": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                        "holdout6", "holdout7", "holdout8"),
           "holdout10": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                         "holdout6", "holdout7", "holdout8", "holdout9"),
           "holdout11": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                         "holdout6", "holdout7", "holdout8", "holdout9", "holdout10"),
           "holdout12": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                         "holdout6", "holdout7", "holdout8", "holdout9", "holdout10",
                         "holdout11"),
           "holdout13": ("public", "holdout", "holdout2", "holdout3", "holdout4", "holdout5",
                         "holdout6", "holdout7", "holdout8", "holdout9", "holdout10",
                         "holdout11", "holdout12")}


@pytest.mark.parametrize("name", sorted(EARLIER))
def test_a_later_held_out_corpus_shares_no_report_with_any_other_corpus(name):
    mine = MANIFESTS[name]["scripts"]
    sources = {_report(e["source"]) for e in mine}
    sources |= {_report(e["fix"]["from"]) for e in mine if "fix" in e}
    others = set()
    for other in EARLIER[name]:
        others |= {_report(u) for u in _urls_in(CORPORA[other][0])}
    cited = set()
    for directory in OTHER_SOURCES:
        others |= {_report(u) for u in _urls_in(directory)}
        cited |= _cited(directory)
    assert not sources & others, sorted(sources & others)
    known = {script for (corpus, script) in SHARED_WITH_LINT if corpus == name}
    shared = {e["script"] for e in mine if ({_report(e["source"])} | (
        {_report(e["fix"]["from"])} if "fix" in e else set())) & cited}
    assert shared == known, sorted(shared ^ known)
    taken = {e["script"] for other in EARLIER[name] for e in MANIFESTS[other]["scripts"]}
    assert not {e["script"] for e in mine} & taken


@pytest.mark.parametrize("corpus, entry", ENTRIES, ids=IDS)
def test_entry_is_well_formed(corpus, entry):
    assert set(entry) <= FIELDS, set(entry) - FIELDS
    assert entry["cause"] in CAUSES or entry["cause"] == "healthy"
    assert set(entry.get("also", ())) <= set(CAUSES)
    assert entry["device"] in ("cpu", "cuda")
    assert all(isinstance(a, str) for a in entry["doctor_args"] + entry["script_args"])
    assert URL.fullmatch(entry["source"]), entry["source"]
    assert entry["what"].strip()
    if entry["cause"] != "healthy":
        assert entry["culprit"] and all(isinstance(c, str) and c for c in entry["culprit"])
        assert entry["line"] and all(isinstance(n, int) for n in entry["line"])
    else:
        assert "culprit" not in entry and "line" not in entry and "fix" not in entry
    if "fix" in entry:
        assert isinstance(entry["fix"]["line"], int)
        assert URL.fullmatch(entry["fix"]["from"]), entry["fix"]["from"]
        assert ("before" in entry["fix"] and "after" in entry["fix"]) or entry["fix"].get("change")


@pytest.mark.parametrize("corpus, entry", ENTRIES, ids=IDS)
def test_script_compiles_and_names_its_source(corpus, entry):
    path = CORPORA[corpus][0] / entry["script"]
    source = path.read_text(encoding="utf-8")
    compile(source, str(path), "exec")
    header = _header(path)
    assert header and header[0].startswith("# Source: "), entry["script"]
    assert entry["source"] in header[0]
    assert any(h.startswith("# Adapted: ") for h in header), entry["script"]
    lines = source.splitlines()
    for n in entry.get("line", ()):  # expected lines point at code, not at comments
        assert 1 <= n <= len(lines), (entry["script"], n)
        assert lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")
    fix = entry.get("fix")
    if fix and "before" in fix:  # the public fix rewrites the statement it names
        assert lines[fix["line"] - 1].strip() == fix["before"], entry["script"]


LATER_ENTRIES = [(name, e) for name in sorted(EARLIER) for e in MANIFESTS[name]["scripts"]]


@pytest.mark.parametrize("corpus, entry", LATER_ENTRIES,
                         ids=[f"{name}/{e['script']}" for name, e in LATER_ENTRIES])
def test_later_held_out_lines_name_the_culprit(corpus, entry):
    """Every expected line of the later held-out corpora names one of the accepted culprits."""
    if entry["cause"] == "healthy":
        return
    lines = (CORPORA[corpus][0] / entry["script"]).read_text(encoding="utf-8").splitlines()
    names = {part for culprit in entry["culprit"]
             for part in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", culprit)} - {"self"}
    for n in entry["line"]:
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", lines[n - 1]))
        assert names & words, (entry["script"], n, lines[n - 1].strip(), sorted(names))
