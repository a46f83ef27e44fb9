"""Fragmentation: the pure judgement on stats dicts (CPU), the torch wrapper (CPU and CUDA)."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.analyze.fragmentation import judge
from torchmem.model.readings import Fragmentation

MiB = 1024**2
GiB = 1024**3


def stats(allocated: int, reserved: int, split: int, active: int | None = None,
          retries: int = 0, ooms: int = 0) -> dict[str, int]:
    return {
        "allocated_bytes.all.current": allocated,
        "reserved_bytes.all.current": reserved,
        "active_bytes.all.current": allocated if active is None else active,
        "inactive_split_bytes.all.current": split,
        "num_alloc_retries": retries,
        "num_ooms": ooms,
        "allocated_bytes.large_pool.current": allocated,  # extra keys are ignored
    }


def test_empty_stats_mean_nothing_allocated() -> None:
    r = judge({}, "cuda:0")
    assert (r.applicable, r.verdict, r.reserved, r.ratio) == (True, "ok", 0, 0.0)
    assert "Nothing allocated" in r.explanation and r.advice == ()


def test_split_free_blocks_are_fragmentation_and_empty_cache_does_not_help() -> None:
    r = judge(stats(allocated=1 * GiB, reserved=2 * GiB, split=768 * MiB), "cuda:1")
    assert r.verdict == "fragmented" and r.device == "cuda:1"
    assert r.inactive_split == 768 * MiB
    assert r.releasable == 2 * GiB - 1 * GiB - 768 * MiB
    assert r.ratio == pytest.approx(0.375)
    assert any("expandable_segments" in a for a in r.advice)
    assert any("empty_cache() does not help" in a for a in r.advice)


def test_big_cache_of_whole_free_segments_is_not_fragmentation() -> None:
    # reserved is 4x allocated: the seed's "reserved > 1.5x allocated" rule would cry wolf
    r = judge(stats(allocated=1 * GiB, reserved=4 * GiB, split=8 * MiB))
    assert r.verdict == "cached"
    assert r.releasable == 3 * GiB - 8 * MiB
    assert "not fragmentation" in r.explanation


def test_small_absolute_waste_is_ok_even_at_a_high_ratio() -> None:
    r = judge(stats(allocated=10 * MiB, reserved=40 * MiB, split=30 * MiB))
    assert r.ratio == 0.75 and r.verdict == "ok"


@pytest.mark.parametrize(("split", "verdict"), [(399 * MiB, "ok"), (400 * MiB, "fragmented")])
def test_ratio_threshold_is_twenty_percent_of_reserved(split: int, verdict: str) -> None:
    r = judge(stats(allocated=2 * GiB - split, reserved=2000 * MiB, split=split))
    assert r.verdict == verdict


def test_retries_and_ooms_are_pressure_first() -> None:
    r = judge(stats(allocated=1 * GiB, reserved=2 * GiB, split=900 * MiB, retries=3, ooms=1))
    assert r.verdict == "pressure"
    assert "3 allocation(s)" in r.explanation and "1 out-of-memory" in r.explanation
    assert any("expandable_segments" in a for a in r.advice)


def test_active_blocks_pending_on_a_stream_are_not_releasable() -> None:
    r = judge(stats(allocated=1 * GiB, reserved=2 * GiB, split=0, active=1 * GiB + 512 * MiB))
    assert r.releasable == 512 * MiB


def test_record_round_trips() -> None:
    r = judge(stats(allocated=1 * GiB, reserved=2 * GiB, split=768 * MiB))
    assert Fragmentation.from_dict(r.to_dict()) == r


def test_cpu_is_not_applicable_not_an_error() -> None:
    r = torchmem.fragmentation("cpu")
    assert (r.applicable, r.verdict, r.device) == (False, "not_applicable", "cpu")
    assert "does not apply" in r.explanation


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only default")
def test_default_device_without_an_accelerator_is_not_applicable() -> None:
    assert torchmem.fragmentation().verdict == "not_applicable"


@pytest.mark.cuda
def test_cuda_split_segments_are_seen_and_match_memory_stats() -> None:
    torch.cuda.empty_cache()
    # 3 MiB requests share 20 MiB segments; freeing every other one leaves split holes
    blocks = [torch.empty(3 * MiB, dtype=torch.uint8, device="cuda") for _ in range(12)]
    del blocks[::2]
    r = torchmem.fragmentation("cuda:0")
    s = torch.cuda.memory_stats(0)
    assert r.inactive_split == s["inactive_split_bytes.all.current"] >= 6 * 3 * MiB
    assert r.allocated == s["allocated_bytes.all.current"]
    assert r.reserved == s["reserved_bytes.all.current"]
    del blocks
    torch.cuda.empty_cache()


@pytest.mark.cuda
def test_cuda_freed_big_tensor_is_cache_not_fragmentation() -> None:
    torch.cuda.empty_cache()
    x = torch.empty(1 * GiB, dtype=torch.uint8, device="cuda")
    del x
    r = torchmem.fragmentation("cuda:0")
    assert r.releasable >= 1 * GiB and r.verdict == "cached"
    torch.cuda.empty_cache()
    assert torchmem.fragmentation("cuda:0").releasable < 1 * GiB
