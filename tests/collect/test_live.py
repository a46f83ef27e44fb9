"""live_tensor_bytes / iter_live_tensors against exact byte counts of known tensors."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from torchmem.collect.graph import storage_key, storage_nbytes, walk
from torchmem.collect.live import iter_live_tensors, live_tensor_bytes, scan, tensor_types


def cpu_bytes(**kw: bool) -> int:
    gc.collect()
    return live_tensor_bytes(**kw).get("cpu", 0)


def test_plain_tensor_counted_exactly() -> None:
    before = cpu_bytes()
    x = torch.zeros(1000, dtype=torch.float32)
    y = torch.zeros(10, 10, dtype=torch.float64)
    assert cpu_bytes() - before == 4000 + 800
    del x, y
    assert cpu_bytes() == before


def test_views_count_their_storage_once() -> None:
    before = cpu_bytes()
    x = torch.zeros(1000)
    views = [x[10:20], x.view(10, 100), x.t() if x.dim() == 2 else x[::2], x.detach()]
    assert cpu_bytes() - before == 4000
    del x
    # the small view alone still pins the whole 4000-byte storage
    assert cpu_bytes() - before == 4000
    del views
    assert cpu_bytes() == before


def test_saved_for_backward_only_reachable_through_graph() -> None:
    w = torch.randn(100, 100, requires_grad=True)  # 40_000 bytes
    before = cpu_bytes()
    x = torch.randn(50, 100)  # 20_000 bytes, saved by mm (w requires grad)
    loss = (x @ w).tanh().sum()  # tanh saves its 50x100 result: 20_000 bytes
    del x
    with_graph = cpu_bytes()
    without_graph = cpu_bytes(include_graphs=False)
    # torch keeps the Python object of a saved *input* (x) alive, so gc sees it; the
    # tanh result is saved as a new tensor that only the graph can reach
    assert without_graph - before == 4 + 20_000
    assert with_graph - before == 4 + 20_000 + 20_000
    # reading the saved tensors did not make them gc-visible
    assert cpu_bytes(include_graphs=False) == without_graph
    # the shared graph walk agrees on the saved bytes
    assert walk([loss]).saved_bytes() == 40_000
    loss.backward()  # frees the saved tensors, creates w.grad (40_000 bytes)
    assert cpu_bytes() - before == 4 + 40_000
    del loss
    w.grad = None


def _cpu_storages() -> dict[object, int]:
    gc.collect()
    return {storage_key(t): storage_nbytes(t) for t in iter_live_tensors() if t.device.type == "cpu"}


def test_gradient_held_only_in_cpp_is_counted() -> None:
    lin = torch.nn.Linear(64, 32)  # weight 8192 B, bias 128 B
    x = torch.randn(8, 64)
    before = _cpu_storages()
    lin(x).sum().backward()  # .grad created in C++, never touched from Python
    after = _cpu_storages()
    # the storages that appeared (a tensor an earlier test left to die meanwhile, which
    # would lower a difference of totals, does not count here)
    new = {k: n for k, n in after.items() if k not in before}
    assert sorted(new.values()) == [128, 8192]
    assert set(new) == {storage_key(lin.weight.grad), storage_key(lin.bias.grad)}


def test_frozen_parameter_keeps_stale_grad() -> None:
    lin = torch.nn.Linear(16, 16, bias=False)  # 1024 B
    lin(torch.ones(1, 16)).sum().backward()
    lin.weight.requires_grad_(False)
    found = scan()
    keys = {storage_key(g) for g in found.grads}
    assert storage_key(lin.weight.grad) in keys


def test_sparse_counted_through_components() -> None:
    dense = torch.zeros(100, 100)
    dense[0, 0] = 1.0
    dense[5, 7] = 2.0
    before = cpu_bytes()
    sp = dense.to_sparse()  # 2 values (float32) + 2x2 int64 indices
    expected = sp._values().untyped_storage().nbytes() + sp._indices().untyped_storage().nbytes()
    assert expected == 8 + 32
    assert cpu_bytes() - before == expected
    del sp


def test_meta_and_fake_tensors_own_no_memory() -> None:
    before = live_tensor_bytes()
    m = torch.empty(1 << 20, device="meta")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        f = torch.empty(1 << 20)
    after = live_tensor_bytes()
    assert "meta" not in after
    assert after.get("cpu", 0) - before.get("cpu", 0) < 1 << 20
    del m, f


def test_scan_does_not_keep_tensors_alive() -> None:
    x = torch.randn(1000, requires_grad=True)
    y = (x * 2).exp()
    refs = [weakref.ref(x), weakref.ref(y)]
    n = sum(1 for _ in iter_live_tensors())
    assert n > 0
    live_tensor_bytes()
    found = scan()
    del found
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)


def test_iter_live_tensors_sees_graph_only_tensors() -> None:
    w = torch.randn(300, requires_grad=True)
    out = (w * 2).exp().sum()  # exp saves its result, a tensor Python never saw
    saved = walk([out]).saved  # {key: bytes}: the 1200-byte exp result, mul's 0-d scalar
    (key,) = [k for k, n in saved.items() if n == 1200]
    assert key in {storage_key(t) for t in iter_live_tensors()}
    assert key not in {storage_key(t) for t in iter_live_tensors(include_graphs=False)}
    del out


def test_tensor_subclasses_are_found() -> None:
    class Tagged(torch.Tensor):
        pass

    before = cpu_bytes()
    t = torch.zeros(256).as_subclass(Tagged)  # shares the 1024-byte storage
    plain, special = tensor_types()
    assert Tagged in special and torch.nn.Parameter in plain
    assert cpu_bytes() - before == 1024
    del t


@pytest.mark.cuda
def test_cuda_bytes_match_allocator() -> None:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    before = live_tensor_bytes().get("cuda:0", 0)
    x = torch.empty(1 << 20, device="cuda")  # 4 MiB: allocator rounding adds nothing
    assert live_tensor_bytes()["cuda:0"] - before == 4 << 20
    assert torch.cuda.memory_allocated() - base == 4 << 20
    del x


def _zoo() -> dict[str, object]:
    """Tensors in every situation a scan must handle, including those C++ also holds."""

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, a: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(a)  # type: ignore[attr-defined]
            return a * 2

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            return g * 2

    class Tagged(torch.Tensor):
        pass

    leaf = torch.randn(3, requires_grad=True)
    lin = torch.nn.Linear(4, 4)
    base = torch.randn(100)
    zoo: dict[str, object] = {
        "leaf": leaf,
        "saved": leaf * leaf,  # the leaf is saved for backward: C++ holds it too
        "lin": lin,
        "pending": lin(torch.randn(2, 4)).sum(),  # parameters held by AccumulateGrad
        "view": base[:2],  # its base is held by the view only
        "custom": Double.apply(torch.randn(5, requires_grad=True)),
        "tagged": torch.zeros(3).as_subclass(Tagged),
        "param": torch.nn.Parameter(torch.zeros(2)),
        "sparse": torch.eye(3).to_sparse(),
    }
    del base
    return zoo


def test_referrer_scan_finds_what_the_object_scan_finds() -> None:
    from torchmem.collect.live import _gc_tensors, referrers_list_tensors

    if not referrers_list_tensors():
        pytest.skip("this torch hides tensors that C++ also holds from tp_traverse")
    zoo = _zoo()
    plain, special = tensor_types()
    via_objects = _gc_tensors(plain, special, frozenset(), False, via="objects")
    via_referrers = _gc_tensors(plain, special, frozenset(), False, via="referrers")
    for a, b in zip(via_objects[:4], via_referrers[:4]):
        assert {id(t) for t in a} == {id(t) for t in b}
    assert via_objects[4] > 0 and via_referrers[4] is None  # only a full listing counts
    assert any(t is zoo["leaf"] for t in via_referrers[0])
    assert any(t is zoo["tagged"] for t in via_referrers[1])
    del via_objects, via_referrers, zoo


def test_c_and_python_classify_agree() -> None:
    from torchmem.collect import live
    from torchmem.collect.gc_classify import classify_py

    if live.classify is classify_py:
        pytest.skip("torchmem was built without its C accelerator")
    zoo = _zoo()
    codes = {torch.Tensor: 0, torch.nn.Parameter: 1, torch.nn.Linear: 2}
    objs = gc.get_objects()
    fast = live.classify(objs, codes, 3)
    slow = classify_py(objs, codes, 3)
    del objs
    assert [[id(o) for o in b] for b in fast] == [[id(o) for o in b] for b in slow]
    assert any(o is zoo["lin"] for o in fast[2])
    with pytest.raises(ValueError, match="range"):
        live.classify([zoo["lin"]], {torch.nn.Linear: 3}, 3)
    del fast, slow, zoo


def test_live_bytes_are_the_same_on_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchmem.collect import gc_classify, live, storages
    from torchmem.collect.gc_classify import classify_py

    zoo = _zoo()
    gc.collect()
    expected = live_tensor_bytes()
    # as built without a compiler
    monkeypatch.setattr(live, "classify", classify_py)
    monkeypatch.setattr(gc_classify, "classify", classify_py)
    assert live_tensor_bytes() == expected
    monkeypatch.setitem(storages._TRAITS, "storage_identity", False)  # torch < 2.1: by address
    assert live_tensor_bytes() == expected
    del zoo


def test_frozen_objects_are_announced() -> None:
    x = torch.zeros(1000)
    gc.freeze()
    try:
        with pytest.warns(RuntimeWarning, match="gc.freeze"):
            frozen = live_tensor_bytes()
    finally:
        gc.unfreeze()
    assert frozen.get("cpu", 0) < live_tensor_bytes()["cpu"]  # x was frozen, then seen
    del x
