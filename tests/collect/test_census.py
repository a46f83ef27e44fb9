"""census(): roles and names on a real model with Adam, totals, pinning views, no retention."""

from __future__ import annotations

import dataclasses
import gc
import json
import weakref

import pytest
import torch
from torch import nn

import torchmem
from torchmem.collect.graph import storage_key, walk
from torchmem.collect.live import live_tensor_bytes
from torchmem.errors import UsageError
from torchmem.model.census import ROLES, Census, StorageEntry, StorageGroup


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(4)])
        self.norm = nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def by_key(c: Census) -> dict[int, StorageEntry]:
    return {e.key: e for e in c.storages}


@pytest.fixture(scope="module")
def trained() -> tuple[Net, torch.optim.Adam]:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(8, 16)).sum().backward()
    opt.step()
    return model, opt


def test_roles_of_model_with_adam_after_one_step(trained: tuple[Net, torch.optim.Adam]) -> None:
    model, opt = trained
    c = torchmem.census()  # owners found by the gc scan
    entries = by_key(c)
    params = dict(model.named_parameters())
    assert "encoder.layers.3.fc1.weight" in params
    for name, p in params.items():
        e = entries[storage_key(p)]
        assert (e.role, e.name, e.nbytes) == ("parameter", name, p.numel() * 4)
        g = entries[storage_key(p.grad)]
        assert (g.role, g.name, g.nbytes) == ("gradient", f"grad of {name}", p.numel() * 4)
        state = opt.state[p]
        assert set(state) == {"step", "exp_avg", "exp_avg_sq"}
        for slot, value in state.items():
            s = entries[storage_key(value)]
            assert (s.role, s.name) == ("optimizer_state", f"{slot} of {name}")
            assert s.nbytes == value.untyped_storage().nbytes()
    for name, b in model.named_buffers():
        e = entries[storage_key(b)]
        assert (e.role, e.name) == ("buffer", name)
    # names are exact, not approximate: the deepest module path is spelled out
    assert entries[storage_key(model.encoder.layers[3].fc1.weight)].shapes == ((32, 16),)


def test_explicit_owners_and_prefix(trained: tuple[Net, torch.optim.Adam]) -> None:
    model, opt = trained
    c = torchmem.census(modules={"net": model}, optimizers=[opt])
    e = by_key(c)[storage_key(model.head.bias)]
    assert e.name == "net.head.bias"
    assert c.find("exp_avg_sq of net.head.bias") is not None


def test_pending_graph_activations_match_walk_and_hand_count() -> None:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x = torch.randn(4, 16)
    out = mlp(x).sum()
    # by hand: addmm #1 saves x (4x16 float32 = 256 B) and weight.t() (a parameter);
    # relu saves its result (4x32 = 512 B), which addmm #2 saves again as its input
    c = torchmem.census(modules=[mlp], optimizers=[])
    saved = walk([out]).saved
    param_keys = {storage_key(p) for p in mlp.parameters()}
    entries = by_key(c)
    activation = {k: n for k, n in saved.items() if k not in param_keys}
    assert sorted(activation.values()) == [256, 512]
    for k in activation:
        assert entries[k].role == "activation"
        assert entries[k].name is not None and entries[k].name.startswith("saved by ")
    for k in param_keys:
        assert entries[k].role == "parameter"  # saved weights keep their owner role
    assert entries[storage_key(x)].nbytes == 256
    out.backward()  # frees the saved tensors
    after = by_key(torchmem.census(modules=[mlp], optimizers=[]))
    relu_key = next(k for k, n in activation.items() if n == 512)
    assert relu_key not in after or after[relu_key].role != "activation"


def test_totals_are_exact_and_match_live_bytes(trained: tuple[Net, torch.optim.Adam]) -> None:
    gc.collect()
    c = torchmem.census()
    live = live_tensor_bytes()
    assert c.bytes_by_device() == live
    assert c.total_bytes == sum(live.values())
    assert set(c.bytes_by_role()) == set(ROLES)
    assert sum(c.bytes_by_role().values()) == c.total_bytes
    assert sum(g.storages for g in c.groups) == c.n_storages


def test_max_other_keeps_totals(trained: tuple[Net, torch.optim.Adam]) -> None:
    keep = [torch.zeros(n + 1) for n in range(50)]  # 50 "other" storages, 4..200 bytes
    full = torchmem.census(max_other=None)
    few = torchmem.census(max_other=3)
    assert few.bytes_by_role() == full.bytes_by_role()
    assert few.total_bytes == full.total_bytes
    others = [e for e in few.storages if e.role == "other"]
    assert len(others) == 3
    assert few.omitted_storages == full.n_storages - len(few.storages)
    listed_other = sum(e.nbytes for e in others)
    assert few.omitted_bytes == full.bytes_by_role()["other"] - listed_other
    biggest = sorted((e.nbytes for e in full.storages if e.role == "other"), reverse=True)[:3]
    assert [e.nbytes for e in others] == biggest
    assert [e.nbytes for e in few.storages] == sorted((e.nbytes for e in few.storages), reverse=True)
    del keep


def test_small_slice_of_big_tensor_is_reported_as_pinning() -> None:
    big = torch.randn(100, 1000)  # 400_000 bytes
    view = big[0, :1]  # 4 bytes
    key = storage_key(view)
    assert not any(p.key == key for p in torchmem.census().pinning_views)  # big still named
    del big
    pins = {p.key: p for p in torchmem.census().pinning_views}
    assert key in pins
    p = pins[key]
    assert (p.storage_bytes, p.used_bytes, p.shape, p.dtype) == (400_000, 4, (1,), "float32")
    assert p.wasted_bytes == 399_996
    fixed = view.clone()
    del view
    assert key not in {p.key for p in torchmem.census().pinning_views}
    del fixed


def test_column_view_pins_and_whole_view_does_not() -> None:
    col = torch.zeros(100, 1000)[:, 0]  # 100 elements of a 400_000-byte storage
    same = torch.zeros(1000)[:]  # a view covering its whole storage
    pins = {p.key: p for p in torchmem.census().pinning_views}
    assert pins[storage_key(col)].used_bytes == 400
    assert storage_key(same) not in pins
    del col, same


def test_census_does_not_keep_tensors_alive() -> None:
    model = nn.Linear(64, 64)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 64)).sum().backward()
    opt.step()
    x = torch.randn(128, 64)
    pending = model(x).relu().sum()
    big = torch.randn(1000)
    pin = big[:1]
    del big
    refs = [weakref.ref(t) for t in (model.weight, model.weight.grad, x, pending, pin)]
    refs += [weakref.ref(v) for v in opt.state[model.weight].values()]
    c = torchmem.census()
    assert c.pinning_views and c.bytes_by_role()["activation"] > 0
    del model, opt, x, pending, pin
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    _assert_plain(c)


def _assert_plain(value: object) -> None:
    """Records hold only ints, floats, strings, bools, None, tuples and records."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            _assert_plain(getattr(value, f.name))
    elif type(value) is tuple:
        for v in value:  # type: ignore[attr-defined]
            _assert_plain(v)
    else:
        assert type(value) in (int, float, str, bool, type(None)), type(value)


def test_json_round_trip(trained: tuple[Net, torch.optim.Adam]) -> None:
    c = torchmem.census()
    again = Census.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c
    assert again.bytes_by_role() == c.bytes_by_role()
    assert "Census(" in repr(c) and "parameter" in repr(c)


def test_tied_weights_are_one_storage() -> None:
    emb = nn.Embedding(100, 8)
    out = nn.Linear(8, 100, bias=False)
    out.weight = emb.weight
    tied = nn.ModuleDict({"emb": emb, "out": out})
    c = torchmem.census(modules=[tied], optimizers=[])
    e = by_key(c)[storage_key(emb.weight)]
    assert (e.role, e.name, e.nbytes) == ("parameter", "emb.weight", 3200)


def test_frozen_parameter_with_stale_grad() -> None:
    lin = nn.Linear(8, 8, bias=False)
    lin(torch.ones(1, 8)).sum().backward()
    lin.weight.requires_grad_(False)  # frozen, but .grad still holds 256 bytes
    e = by_key(torchmem.census(modules=[lin], optimizers=[]))[storage_key(lin.weight.grad)]
    assert (e.role, e.name, e.nbytes) == ("gradient", "grad of weight", 256)


def test_bad_arguments_raise_usage_error() -> None:
    with pytest.raises(UsageError, match="max_other"):
        torchmem.census(max_other=-1)
    with pytest.raises(UsageError, match="pin_ratio"):
        torchmem.census(pin_ratio=0)


def test_record_totals_without_groups() -> None:
    """A census built by hand (or read back) totals its storages when it has no groups."""
    e1 = StorageEntry(1, 100, "cpu", "float32", ((25,),), "parameter", "w")
    e2 = StorageEntry(2, 40, "cuda:0", "float16", ((20,),), "other")
    c = Census(storages=(e1, e2), n_storages=2)
    assert c.bytes_by_role()["parameter"] == 100 and c.bytes_by_role()["other"] == 40
    assert c.bytes_by_device() == {"cpu": 100, "cuda:0": 40}
    assert c.total_bytes == 140 and c.top(1) == (e1,) and c.top(5, role="other") == (e2,)
    g = Census(storages=(e1,), groups=(StorageGroup("parameter", "cpu", 3, 300),))
    assert g.total_bytes == 300  # groups are exact even when storages are truncated


def test_without_graphs_saved_outputs_are_not_counted() -> None:
    w = torch.randn(256, requires_grad=True)
    out = (w * 2).exp().sum()  # exp saves its 1024-byte result; Python never saw it
    (key,) = [k for k, n in walk([out]).saved.items() if n == 1024]
    assert by_key(torchmem.census(max_other=None))[key].role == "activation"
    assert key not in by_key(torchmem.census(include_graphs=False, max_other=None))
    del out


def test_sparse_and_subclass_tensors_are_counted() -> None:
    class Tagged(torch.Tensor):
        pass

    sp = torch.zeros(50, 50)
    sp[1, 2] = 1.0
    sp = sp.to_sparse()  # one float32 value, 2x1 int64 indices
    tagged = torch.zeros(300).as_subclass(Tagged)
    entries = by_key(torchmem.census(max_other=None))
    assert entries[storage_key(sp._values())].nbytes == 4
    assert entries[storage_key(sp._indices())].nbytes == 16
    assert entries[storage_key(tagged)].nbytes == 1200
    del sp, tagged


@pytest.mark.cuda
def test_cuda_census_matches_allocator() -> None:
    torch.cuda.synchronize()
    before = torchmem.census().bytes_by_device().get("cuda:0", 0)
    base = torch.cuda.memory_allocated()
    model = nn.Linear(1024, 1024).cuda()  # 4 MiB weight + 4 KiB bias
    c = torchmem.census()
    assert c.bytes_by_device()["cuda:0"] - before == 1024 * 1024 * 4 + 4096
    assert torch.cuda.memory_allocated() - base == 1024 * 1024 * 4 + 4096
    assert by_key(c)[storage_key(model.weight)].device == "cuda:0"


def test_groups_split_by_device_and_role() -> None:
    """The multi-device totals, exercised on CPU with device objects alone."""
    from torchmem.collect.census import _groups

    cpu, gpu = torch.device("cpu"), torch.device("cuda:0")
    keys = [10, 11, 12, 13, 14]
    nbytes = [100, 200, 300, 400, 500]
    devices = [cpu, gpu, gpu, cpu, gpu]
    role_of = {11: 0, 13: 2}  # key 11: parameter on the GPU, key 13: gradient on the CPU
    pos = {k: i for i, k in enumerate(keys)}
    groups = _groups(
        nbytes, devices, {cpu, gpu}, role_of,
        lambda k: devices[pos[k]], lambda k: nbytes[pos[k]],
    )
    cells = {(g.role, g.device): (g.storages, g.nbytes) for g in groups}
    assert cells == {
        ("parameter", "cuda:0"): (1, 200),
        ("gradient", "cpu"): (1, 400),
        ("other", "cpu"): (1, 100),
        ("other", "cuda:0"): (2, 800),
    }
    c = Census(groups=groups)
    assert c.bytes_by_device() == {"cpu": 500, "cuda:0": 1000}
    assert c.bytes_by_role()["other"] == 900


def test_same_census_without_accelerator_or_storage_objects(
    trained: tuple[Net, torch.optim.Adam], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pure-Python class pass and the by-address storage keys give the same census."""
    from torchmem.collect import gc_classify, live, storages
    from torchmem.collect.gc_classify import classify_py

    model, _ = trained
    x = torch.randn(4, 16)
    pending = model(x).sum()  # saved activations on top of the trained model
    big = torch.randn(100, 100)
    pin = big[0, :2]
    del big

    def plain(c: Census) -> dict[str, object]:
        d = c.to_dict()
        d.pop("elapsed_s")
        return d

    gc.collect()
    expected = plain(torchmem.census(max_other=None))
    assert expected["pinning_views"] and expected["n_storages"]
    monkeypatch.setattr(live, "classify", classify_py)
    monkeypatch.setattr(gc_classify, "classify", classify_py)
    assert plain(torchmem.census(max_other=None)) == expected
    monkeypatch.setitem(storages._TRAITS, "storage_identity", False)
    assert plain(torchmem.census(max_other=None)) == expected
    del pending, pin
