"""compare_ranks(): two real gloo ranks, one holding 8 MiB more, compared on both."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

import torchmem
from torchmem.errors import UsageError
from torchmem.model.ranks import RankReport, RankRow
from torchmem.model.readings import Reading

EXTRA = 8 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, port: int, results: Any) -> None:
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        weights = torch.zeros(1 << 18)  # 1 MiB on both ranks
        extra = torch.zeros(EXTRA // 4) if rank == 1 else None  # rank 1 keeps 8 MiB more
        report = torchmem.compare_ranks("cpu", exact=True, census=True)
        results[rank] = json.dumps(report.to_dict())
        del weights, extra
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_gloo_ranks_see_the_same_imbalance() -> None:
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_rank_main, args=(_free_port(), results), nprocs=2, join=True)
    reports = {r: RankReport.from_dict(json.loads(results[r])) for r in (0, 1)}
    assert reports[0] == reports[1]  # every rank gets the same report
    report = reports[0]
    assert [row.rank for row in report.rows] == [0, 1]
    assert report.heaviest.rank == 1 and report.lightest.rank == 0
    assert report.spread_bytes == EXTRA  # exact tensor bytes, to the byte
    assert report.role_spread()["other"] == EXTRA
    assert report.imbalanced
    line = report.explain()
    assert line.startswith("imbalanced: rank 1 uses 8.0 MiB more than rank 0 on cpu")
    assert "most of it is other (8.0 MiB)" in line


def _row(rank: int, used: int, roles: dict[str, int] | None = None) -> RankRow:
    return RankRow(rank, "host", Reading("cuda:0", 0.0, allocated=used), roles)


def test_verdicts_without_a_process_group() -> None:
    balanced = RankReport((_row(0, 1000), _row(1, 950)), tolerance=0.1)
    assert not balanced.imbalanced and balanced.explain().startswith("balanced: 2 ranks")
    skewed = RankReport((_row(0, 3000, {"optimizer_state": 2000, "parameter": 1000}),
                         _row(1, 1000, {"optimizer_state": 0, "parameter": 1000})))
    assert skewed.imbalanced and skewed.heaviest.rank == 0
    assert list(skewed.role_spread()) == ["optimizer_state", "parameter"]
    assert "most of it is optimizer_state" in skewed.explain()
    assert RankReport((_row(0, 5),)).explain() == "one rank: nothing to compare"
    assert RankReport.from_dict(json.loads(json.dumps(skewed.to_dict()))) == skewed


def test_without_a_process_group_it_is_a_usage_error() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    with pytest.raises(UsageError, match="no process group"):
        torchmem.compare_ranks()
    with pytest.raises(UsageError, match="tolerance"):
        torchmem.compare_ranks(tolerance=2)
