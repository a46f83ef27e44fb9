"""snapshot / snapshot_state never alias live tensors; offload/onload move in place."""

from __future__ import annotations

import pytest
import torch

import torchmem
from torchmem.errors import UsageError


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_snapshot_is_detached_independent_copy() -> None:
    x = torch.randn(4, 3, requires_grad=True)
    y = (x * 2).t()  # non-contiguous, with history
    s = torchmem.snapshot(y)
    assert torch.equal(s, y) and not s.requires_grad and s.grad_fn is None
    assert not _shares(s, y)
    with torch.no_grad():
        y.add_(1)
    assert not torch.equal(s, y)  # the snapshot did not follow


def test_snapshot_of_containers_and_devices() -> None:
    batch = {"x": torch.ones(2), "pair": (torch.zeros(1), 3), "n": 5}
    s = torchmem.snapshot(batch, "cpu")
    assert s["n"] == 5 and s["pair"][1] == 3
    assert not _shares(s["x"], batch["x"]) and not _shares(s["pair"][0], batch["pair"][0])
    m = torchmem.snapshot(torch.ones(3), "meta")
    assert m.device.type == "meta"


def test_state_dict_aliases_parameters_but_snapshot_state_does_not() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    naive = model.state_dict()  # the seed guide's first attempt
    best = torchmem.snapshot_state(model)
    best_opt = torchmem.snapshot_state(opt)
    before = {k: v.clone() for k, v in best.items()}
    for _ in range(2):
        opt.zero_grad()
        model(torch.ones(3)).sum().backward()
        opt.step()
    assert torch.equal(naive["weight"], model.weight)  # followed training: aliased
    assert all(torch.equal(best[k], before[k]) for k in best)  # did not
    assert all(not _shares(best[k], v) for k, v in model.state_dict().items())
    model.load_state_dict(best)
    opt.load_state_dict(best_opt)
    assert torch.equal(model.weight, before["weight"])
    assert opt.state_dict()["state"] == {}


def test_snapshot_state_of_optimizer_copies_its_state() -> None:
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2)).sum().backward()
    opt.step()
    snap = torchmem.snapshot_state(opt)
    live = opt.state_dict()["state"]
    for idx, st in snap["state"].items():
        for k, v in st.items():
            assert torch.equal(v, live[idx][k]) and not _shares(v, live[idx][k])
    with pytest.raises(UsageError):
        torchmem.snapshot_state(torch.ones(1))


def test_offload_optimizer_state_records_home_and_counts_bytes() -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(4)).sum().backward()
    opt.step()
    # exp_avg + exp_avg_sq: 2 * (64 + 16) bytes; the CPU `step` scalars too: 2 * 4
    assert torchmem.offload(opt, "meta") == 2 * (64 + 16) + 8
    assert all(v.device.type == "meta" for st in opt.state.values() for v in st.values())
    assert torchmem.offload(opt, "meta") == 0  # already there


def test_offload_module_already_on_target_moves_nothing_and_keeps_identity() -> None:
    model = torch.nn.Linear(4, 4)
    w = model.weight
    assert torchmem.offload(model) == 0
    assert torchmem.onload(model) == 0
    assert model.weight is w
    with pytest.raises(UsageError):
        torchmem.offload(torch.ones(1))


@pytest.mark.cuda
def test_offload_onload_round_trip_on_cuda() -> None:
    model = torch.nn.Linear(64, 64).cuda()
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(64, device="cuda")).sum().backward()
    opt.step()
    w = model.weight
    ref = model.weight.detach().clone()
    used = torch.cuda.memory_allocated()
    moved = torchmem.offload(model) + torchmem.offload(opt)
    assert model.weight is w and model.weight.device.type == "cpu"
    assert model.weight.is_pinned() and model.weight.grad.device.type == "cpu"
    assert torch.cuda.memory_allocated() <= used - moved + 8 * 512
    torchmem.onload(model)
    torchmem.onload(opt)
    assert model.weight.device.type == "cuda" and torch.equal(model.weight, ref)
    opt.step()  # state back on the parameters' device
