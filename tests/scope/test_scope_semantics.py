"""torchmem.scope semantics: nesting, released-tensor errors, threads, exceptions,
the decorator form and the report."""

from __future__ import annotations

import threading

import pytest
import torch

import torchmem
from torchmem.errors import ReleasedTensorError, UsageError
from torchmem.model.scope import ScopeReport
from torchmem.scope import _engine
from torchmem.scope._free import is_released


def _line_of(marker: str) -> int:
    with open(__file__, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if marker in line and "_line_of" not in line:
                return i
    raise AssertionError(marker)


def test_released_tensor_error_names_the_scope_location_for_every_kind_of_use() -> None:
    with torchmem.scope():  # SCOPE-LINE
        t = torch.randn(4, 4)
        v = t[1:]
    assert is_released(t) and is_released(v)
    where = f"test_scope_semantics.py:{_line_of('# SCOPE-LINE')}"
    uses = [
        lambda: t.sum(),
        lambda: torch.add(t, 1),
        lambda: t + 1,
        lambda: 1 + t,
        lambda: t[0],
        lambda: t.data + 1,
        lambda: v._base.sum(),
        lambda: t.numpy(),
        lambda: t.item(),
        lambda: torch.cat([torch.ones(1, 4), v]),
        lambda: torch.nn.functional.linear(torch.ones(1, 4), t),
        lambda: t.to("cpu"),
        lambda: t.clone(),
        lambda: t.__setitem__(0, 1.0),
        lambda: v * 2,
    ]
    for use in uses:
        with pytest.raises(ReleasedTensorError) as info:
            use()
        assert where in str(info.value)
        assert "released by torchmem.scope" in str(info.value)
        assert "s.keep" in (info.value.tip or "")
    assert isinstance(info.value, RuntimeError)
    assert where in repr(t) and where in str(t) and where in f"{t}"
    assert hash(t) == hash(t)  # usable as a dict key / in sets


def test_released_tensor_answers_metadata_truthfully_and_gc_recipes_work() -> None:
    import gc

    with torchmem.scope():
        t = torch.randn(4, 3, dtype=torch.float64)
        v = t[1:]
    assert is_released(t) and is_released(v)
    assert t.shape == (4, 3) and t.size() == (4, 3) and t.size(1) == 3
    assert t.dtype == torch.float64 and t.device.type == "cpu" and t.dim() == 2
    assert t.numel() == 12 and t.element_size() == 8 and t.stride() == (3, 1)
    assert t.untyped_storage().nbytes() == 0  # the truth: its memory is gone
    assert t.grad is None and t.grad_fn is None and not t.requires_grad
    assert v._base is t and is_released(v._base)
    assert is_released(t.data)  # another object over the freed storage fails clearly too
    # the forum recipe, and torchmem's own gc-walking tools
    sizes = [o.size() for o in gc.get_objects() if torch.is_tensor(o)]
    assert torch.Size([4, 3]) in sizes
    torchmem.census()
    torchmem.read("cpu", exact=True)


def test_pre_existing_and_kept_tensors_are_untouched_by_released_ones() -> None:
    a = torch.ones(3)
    with torchmem.scope() as s:
        b = s.keep(a * 2)
        c = a * 3
    assert torch.equal(b, torch.full((3,), 2.0))
    assert torch.equal(a, torch.ones(3))
    assert is_released(c)
    assert s.report.released_bytes == 12 and s.report.kept_bytes == 12


def test_nested_scopes_move_kept_tensors_to_the_parent() -> None:
    x = torch.ones(8)
    with torchmem.scope() as outer:
        with torchmem.scope() as inner:
            kept_by_inner = inner.keep(x * 2)  # 32 bytes, moves to outer
            inner_tmp = x * 3
        assert is_released(inner_tmp) and not is_released(kept_by_inner)
        both = outer.keep(x * 4)
        with torchmem.scope() as inner2:
            survivor = inner2.keep(x * 5)
    assert inner.report.released == 1 and inner.report.kept == 1
    # outer frees what inner handed on but outer itself did not keep
    assert is_released(kept_by_inner) and is_released(survivor)
    assert not is_released(both)
    assert outer.report.released == 2 and outer.report.released_bytes == 64
    assert outer.report.created == 4  # nested creations count for the outer scope


def test_keep_on_an_outer_scope_from_inside_an_inner_one() -> None:
    x = torch.ones(2)
    with torchmem.scope() as outer:
        with torchmem.scope() as inner:
            t = outer.keep(x + 1)
        assert inner.report.protected == {"outer_keep": 1}
    assert not is_released(t) and t.sum().item() == 4.0


def test_kept_graph_saved_tensors_survive_and_backward_after_scope_matches() -> None:
    torch.manual_seed(0)
    w = torch.randn(6, 6, requires_grad=True)
    x = torch.randn(3, 6)
    ref = (x @ w).sigmoid().exp().sum()
    (g_ref,) = torch.autograd.grad(ref, w)
    with torchmem.scope() as s:
        h = (x @ w).sigmoid()  # SigmoidBackward saves its result h
        loss = s.keep(h.exp().sum())  # ExpBackward saves its result
    assert s.report.protected.get("saved_for_backward", 0) == 2
    (g,) = torch.autograd.grad(loss, w)
    assert torch.equal(g, g_ref)


def test_scope_releases_on_error_too_and_reports_it() -> None:
    holder: list = []
    with pytest.raises(ValueError):
        with torchmem.scope() as s:
            holder.append(torch.ones(100))
            raise ValueError("boom")
    assert is_released(holder[0])
    assert s.report.error == "ValueError" and s.report.released_bytes == 400
    assert not _engine.state().stack and not _engine.state().modes


def test_scoped_decorator_keeps_the_return_value() -> None:
    leaked: list = []

    @torchmem.scoped
    def step(x: torch.Tensor) -> tuple[torch.Tensor, dict]:
        tmp = x * 10
        leaked.append(tmp)
        return x + 1, {"sq": x * x}

    a, extra = step(torch.ones(2))
    assert torch.equal(a, torch.full((2,), 2.0)) and torch.equal(extra["sq"], torch.ones(2))
    assert is_released(leaked[0])

    @torchmem.scoped(name="named")
    def other() -> float:
        leaked.append(torch.zeros(3))
        return 1.0

    assert other() == 1.0 and is_released(leaked[1])
    with pytest.raises(ReleasedTensorError, match="'named'"):
        leaked[1].sum()


def test_scope_is_per_thread() -> None:
    results: dict[str, object] = {}
    started = threading.Event()
    finish = threading.Event()

    def worker() -> None:
        t = torch.ones(16) * 2  # made on another thread while the main scope is open
        results["t"] = t
        started.set()
        finish.wait(5)

    with torchmem.scope() as s:
        th = threading.Thread(target=worker)
        th.start()
        started.wait(5)
        mine = torch.ones(16) * 3
    finish.set()
    th.join()
    assert is_released(mine)
    assert not is_released(results["t"])  # other threads' tensors are not registered
    assert s.report.created == 2  # ones + mul of this thread only


def test_each_thread_has_its_own_scopes() -> None:
    errors: list = []

    def worker(k: int) -> None:
        try:
            for _ in range(20):
                with torchmem.scope() as s:
                    keep = s.keep(torch.full((4,), float(k)) + 1)
                    tmp = keep * 2
                assert is_released(tmp) and keep.sum().item() == 4 * (k + 1)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_usage_errors() -> None:
    s = torchmem.scope()
    with s:
        pass
    with pytest.raises(UsageError):
        s.keep(torch.ones(1))
    with pytest.raises(UsageError):
        with s:
            pass
    with pytest.raises(UsageError):
        torchmem.scope().report


def test_report_round_trips_through_json() -> None:
    with torchmem.scope() as s:
        kept = s.keep(torch.ones(3) + 1)
        torch.zeros(5)
    r = s.report
    assert ScopeReport.from_dict(r.to_dict()) == r
    assert r.created == 3 and r.kept == 1 and r.freed_inside == 2
    assert r.created_bytes == 12 + 12 + 20 and kept.sum().item() == 6


def test_hooks_and_mode_are_removed_after_the_last_scope(scope_engine: str) -> None:
    from torch.overrides import _get_current_function_mode_stack
    from torch.optim import optimizer as optmod
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    def modes() -> tuple[int, int]:
        return len(_get_current_function_mode_stack()), len(_get_current_dispatch_mode_stack())

    before_hooks = len(optmod._global_optimizer_post_hooks)
    before = modes()
    one_more = (before[0] + 1, before[1]) if scope_engine == "calls" else (before[0], before[1] + 1)
    register_hook = torch.Tensor.__dict__["register_hook"]
    with torchmem.scope():
        with torchmem.scope():
            assert modes() == one_more
            # only the dispatch engine needs to wrap torch.Tensor's hook registration
            patched = torch.Tensor.__dict__["register_hook"] is not register_hook
            assert patched == (scope_engine == "dispatch")
        other = "dispatch" if scope_engine == "calls" else "calls"
        with torchmem.scope(engine=other):  # mixing engines: each mode once
            assert modes() == (before[0] + 1, before[1] + 1)
        assert modes() == one_more
    assert len(optmod._global_optimizer_post_hooks) == before_hooks
    assert modes() == before
    assert torch.Tensor.__dict__["register_hook"] is register_hook


def test_scope_works_inside_a_tracker_and_keeps_its_count() -> None:
    with torchmem.track("cpu") as tr:
        with torchmem.scope() as s:
            kept = s.keep(torch.ones(256))  # 1 KiB
            torch.ones(512)
    assert s.report.kept_bytes == 1024 and kept.sum().item() == 256
    assert tr.result().peak_delta >= 1024  # the tracker still saw the allocations
