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
    assert line.startswith(
        "imbalanced: rank 1 holds 8.0 MiB more live tensor bytes than rank 0 on cpu")
    assert "most of it is other (8.0 MiB)" in line


def _row(rank: int, used: int, roles: dict[str, int] | None = None) -> RankRow:
    return RankRow(rank, "host", Reading("cuda:0", 0.0, allocated=used), roles)


def test_verdicts_without_a_process_group() -> None:
    balanced = RankReport((_row(0, 1000), _row(1, 950)), tolerance=0.1)
    assert not balanced.imbalanced and balanced.explain().startswith("balanced: 2 ranks")
    assert "in allocated memory on cuda:0" in balanced.explain()  # names what it compared
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


# Each rank runs as its own process, as under torchrun, with numpy made unimportable
# before torch loads: torch.distributed.all_gather_object needs numpy
# (``tensor.numpy()``), compare_ranks must not.
_RANK_SCRIPT = """
import json, os, sys
sys.modules["numpy"] = None          # as on a machine without numpy
import warnings
warnings.simplefilter("ignore")      # torch warns that it failed to initialise NumPy
import torch
import torch.distributed as dist
import torchmem

dist.init_process_group("gloo")
rank = dist.get_rank()
weights = torch.zeros(1 << 18)                                     # 1 MiB on both ranks
extra = torch.zeros((6 << 20) // 4) if rank == 1 else None         # rank 1: 6 MiB more
default = torchmem.compare_ranks("cpu")
heap = torchmem.compare_ranks("cpu", exact=False)
print(json.dumps({"default": default.to_dict(), "heap": heap.to_dict(),
                  "explain": default.explain(), "heap_explain": heap.explain()}))
dist.destroy_process_group()
"""


def _run_ranks(tmp_path: Any, world: int = 2) -> list[dict[str, Any]]:
    import subprocess
    import sys

    script = tmp_path / "rank.py"
    script.write_text(_RANK_SCRIPT)
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:  # a rank that failed leaves the other waiting in the collective
            if p.poll() is None:
                p.kill()
                p.communicate()
    return outs


@pytest.mark.slow
def test_ranks_without_numpy_compare_live_tensor_bytes_by_default(tmp_path: Any) -> None:
    outs = _run_ranks(tmp_path)
    assert outs[0] == outs[1]  # every rank gets the same report
    report = RankReport.from_dict(outs[0]["default"])
    # on the CPU the default compares exact live tensor bytes, not the C heap
    assert all(row.reading.used_source == "tensor_bytes" for row in report.rows)
    assert report.spread_bytes == 6 << 20
    assert report.imbalanced and report.heaviest.rank == 1
    line = outs[0]["explain"]
    assert line.startswith("imbalanced: rank 1 holds 6.0 MiB more live tensor bytes than rank 0")
    # exact=False compares the C heap, and the verdict says so
    heap = RankReport.from_dict(outs[0]["heap"])
    assert all(row.reading.used_source == "heap" for row in heap.rows)
    assert "C heap" in outs[0]["heap_explain"]
