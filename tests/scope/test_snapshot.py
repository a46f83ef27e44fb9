"""snapshot() copies every container kind it is given; restore_state() restores a
snapshot any number of times (Optimizer.load_state_dict would adopt its tensors)."""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, NamedTuple

import pytest
import torch

import torchmem
from torchmem.errors import UsageError


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    labels: list[torch.Tensor]
    name: str = "b"


@dataclasses.dataclass(frozen=True)
class FrozenBatch:
    x: torch.Tensor
    n: int = dataclasses.field(default=0, init=False)


class Pair(NamedTuple):
    a: torch.Tensor
    b: int


class Holder:
    """A plain object torchmem knows nothing about."""

    def __init__(self) -> None:
        self.t = torch.ones(3)
        self.items = [1, 2]


def test_dataclass_batch_is_copied_not_returned() -> None:
    batch = Batch(torch.zeros(3), [torch.ones(2)])
    snap = torchmem.snapshot(batch)
    assert snap is not batch and type(snap) is Batch
    assert snap.labels is not batch.labels
    assert not _shares(snap.x, batch.x) and not _shares(snap.labels[0], batch.labels[0])
    batch.x.add_(5)
    batch.labels[0].add_(5)
    batch.labels.append(torch.ones(1))
    assert torch.equal(snap.x, torch.zeros(3)) and torch.equal(snap.labels[0], torch.ones(2))
    assert len(snap.labels) == 1 and snap.name == "b"
    frozen = FrozenBatch(torch.zeros(2))
    fsnap = torchmem.snapshot(frozen)
    assert fsnap is not frozen and not _shares(fsnap.x, frozen.x) and fsnap.n == 0


def test_deques_sets_namedtuples_and_dict_subclasses() -> None:
    window = collections.deque([torch.zeros(2), torch.ones(2)], maxlen=5)
    snap = torchmem.snapshot(window)
    assert snap is not window and isinstance(snap, collections.deque) and snap.maxlen == 5
    window[0].add_(1)
    window.append(torch.ones(1))
    assert torch.equal(snap[0], torch.zeros(2)) and len(snap) == 2

    t = torch.zeros(1)
    s = torchmem.snapshot({t})
    (copy_t,) = s
    assert isinstance(s, set) and not _shares(copy_t, t)
    fs = torchmem.snapshot(frozenset([t]))
    assert isinstance(fs, frozenset) and not _shares(next(iter(fs)), t)

    pair = torchmem.snapshot(Pair(torch.zeros(1), 2))
    assert type(pair) is Pair and pair.b == 2

    dd: collections.defaultdict[str, Any] = collections.defaultdict(list, a=torch.zeros(1))
    sdd = torchmem.snapshot(dd)
    assert type(sdd) is collections.defaultdict and sdd.default_factory is list
    assert sdd is not dd and not _shares(sdd["a"], dd["a"])
    od = torchmem.snapshot(collections.OrderedDict(b=torch.ones(1), a=torch.zeros(1)))
    assert type(od) is collections.OrderedDict and list(od) == ["b", "a"]
    assert torchmem.snapshot(torch.Size([2, 3])) == torch.Size([2, 3])


def test_shared_and_cyclic_references_stay_so() -> None:
    t = torch.zeros(2)
    inner = [t]
    data: dict[str, Any] = {"a": inner, "b": inner, "t": t}
    data["self"] = data
    snap = torchmem.snapshot(data)
    assert snap["a"] is snap["b"] and snap["self"] is snap
    assert snap["a"][0] is snap["t"] and not _shares(snap["t"], t)


def test_unknown_objects_are_deep_copied_or_refused() -> None:
    h = Holder()
    snap = torchmem.snapshot({"h": h})
    assert snap["h"] is not h and not _shares(snap["h"].t, h.t)
    h.items.append(3)
    assert snap["h"].items == [1, 2]
    with pytest.raises(UsageError, match="torchmem.snapshot: cannot copy a lock"):
        torchmem.snapshot({"lock": threading.Lock()})
    with pytest.raises(UsageError, match="snapshot_state"):
        torchmem.snapshot(torch.nn.Linear(2, 2))


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad()
        model(torch.linspace(-1, 1, 12).reshape(3, 4)).pow(2).sum().backward()
        opt.step()


def _flat(state: Any) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for k in sorted(state, key=str) for t in _flat(state[k])]
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in _flat(v)]
    return []


def _same(a: Any, b: Any) -> bool:
    ta, tb = _flat(a), _flat(b)
    return len(ta) == len(tb) and all(torch.equal(x, y) for x, y in zip(ta, tb))


def test_load_state_dict_lets_adam_write_into_the_snapshot() -> None:
    # why restore_state exists: torch's own load adopts same-device tensors
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt, 2)
    best_opt = torchmem.snapshot_state(opt)
    frozen = [t.clone() for t in _flat(best_opt)]
    opt.load_state_dict(best_opt)
    _train(model, opt, 1)
    assert not all(torch.equal(a, b) for a, b in zip(_flat(best_opt), frozen))


def test_best_weights_recipe_restores_the_same_values_twice() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    _train(model, opt, 3)
    best, best_opt = torchmem.snapshot_state(model), torchmem.snapshot_state(opt)
    want_model = {k: v.clone() for k, v in model.state_dict().items()}
    want_opt = [t.clone() for t in _flat(opt.state_dict())]

    _train(model, opt, 3)  # train on, then go back to the best
    torchmem.restore_state(model, best)
    torchmem.restore_state(opt, best_opt)
    assert _same(model.state_dict(), want_model) and _same(opt.state_dict(), want_opt)
    _train(model, opt, 3)  # train on from the restored point
    assert not _same(model.state_dict(), want_model)
    torchmem.restore_state(model, best)  # and restore again: the same values, bit for bit
    torchmem.restore_state(opt, best_opt)
    assert _same(model.state_dict(), want_model) and _same(opt.state_dict(), want_opt)
    assert _same(best, want_model) and _same(best_opt, want_opt)  # the snapshots never moved
    # the restored run continues exactly as the first one did from that point
    _train(model, opt, 1)
    again = [t.clone() for t in _flat(model.state_dict())]
    torchmem.restore_state(model, best)
    torchmem.restore_state(opt, best_opt)
    _train(model, opt, 1)
    assert all(torch.equal(a, b) for a, b in zip(_flat(model.state_dict()), again))


def test_restore_state_refuses_what_it_cannot_load() -> None:
    with pytest.raises(UsageError, match="torchmem.restore_state: the object has no"):
        torchmem.restore_state(torch.ones(1), {})
    with pytest.raises(UsageError, match="torchmem.restore_state: expected a state dict"):
        torchmem.restore_state(torch.nn.Linear(1, 1), [1])  # type: ignore[arg-type]
