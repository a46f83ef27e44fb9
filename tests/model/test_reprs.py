"""Reprs a person can read: human units, only the fields that say something."""

from __future__ import annotations

from torchmem.model.readings import Mark, Reading, TrackResult
from torchmem.model.scope import ScopeReport
from torchmem.model.timeline import Sample, Timeline
from torchmem.units import MiB


def test_reading_shows_units_and_only_its_figures() -> None:
    r = Reading("cpu", 1.0, rss=300 * MiB, heap=88 * MiB, tensor_bytes=0)
    assert repr(r) == "Reading(cpu: rss 300.0 MiB, heap 88.0 MiB, tensor_bytes 0 B)"
    cuda = Reading("cuda:0", 1.0, allocated=MiB, reserved=2 * MiB, alloc_retries=0, num_ooms=2)
    assert repr(cuda) == "Reading(cuda:0: allocated 1.0 MiB, reserved 2.0 MiB, num_ooms 2)"
    assert "None" not in repr(cuda) and "time" not in repr(cuda)


def test_mark_and_track_result() -> None:
    r = Reading("cpu", 1.0, heap=10 * MiB)
    mark = Mark("forward", r, delta=4 * MiB, peak_delta=6 * MiB)
    assert repr(mark) == "Mark('forward': delta +4.0 MiB, peak +6.0 MiB)"
    res = TrackResult("cpu", "engine", r, r, -MiB, 6 * MiB, 16 * MiB, (mark,))
    assert repr(res) == ("TrackResult(cpu (engine): delta -1.0 MiB, peak +6.0 MiB above the "
                         "baseline (16.0 MiB), marks ['forward'])")


def test_timeline_repr_is_a_summary_not_every_sample() -> None:
    samples = tuple(
        Sample(float(i), i // 100, Reading("cpu", float(i), heap=MiB * (1 + i % 7)), i % 100 == 0)
        for i in range(10_000)
    )
    tl = Timeline("cpu", 0.01, 10_000, samples, dropped=5, peak=samples[6], started=0.0,
                  stopped=100.0)
    text = repr(tl)
    assert len(text) < 200, text  # the seed printed every sample: megabytes
    assert text == ("Timeline(cpu: 10000 samples over 100.0 s (every 0.01 s), 5 dropped, "
                    "steps 0-99, peak 7.0 MiB at step 0)")
    assert repr(samples[100]) == "Sample(step 1: 3.0 MiB heap, boundary)"
    assert repr(Timeline("cuda:0", None, 8)) == (
        "Timeline(cuda:0: 0 samples over 0.0 s (step boundaries only), running)")


def test_scope_report_shows_what_happened() -> None:
    report = ScopeReport("train.py:42", created=38, created_bytes=3 * MiB, freed_inside=17,
                         kept=1, kept_bytes=MiB, released=20, released_bytes=2 * MiB,
                         released_tensors=25, protected={"saved_for_backward": 2, "module": 0},
                         protected_bytes=512, peak_bytes=3 * MiB)
    assert repr(report) == (
        "ScopeReport(train.py:42: storages created 38 (3.0 MiB), freed inside 17, kept 1 "
        "(1.0 MiB), released 20 (2.0 MiB, 25 tensors), protected 2 (512 B: "
        "saved_for_backward 2), peak 3.0 MiB)")
    assert repr(ScopeReport("a.py:1", error="KeyError")) == (
        "ScopeReport(a.py:1: storages created 0 (0 B), ended by KeyError)")


def test_tracker_repr_uses_units() -> None:
    import torch

    import torchmem

    with torchmem.track(exact=True) as t:
        kept = torch.ones(1024)
    text = repr(t)
    assert text.startswith("Tracker(cpu, finished:") and "KiB" in text, text
    assert "delta=" not in text and str(4096) not in text
    del kept
