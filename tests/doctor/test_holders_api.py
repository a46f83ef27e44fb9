"""torchmem.holders(): the paths, as written, that keep a tensor (or any object) alive."""

from __future__ import annotations

import functools
import gc
import weakref

import torch

import torchmem


class _Stats:
    def __init__(self):
        self.total = torch.zeros(8)


class _Slotted:
    __slots__ = ("kept",)

    def __init__(self, t):
        self.kept = t


def test_list_element_dict_value_and_attribute_with_their_lines():
    stats = _Stats()
    logs = {"loss": [torch.zeros(2), torch.ones(2)]}
    slotted = _Slotted(torch.ones(3))
    assert [h.path for h in torchmem.holders(logs["loss"][1])] == ["logs['loss'][1]"]
    (holder,) = torchmem.holders(stats.total)
    assert holder.path == "stats.total" and holder.kind == "attribute"
    assert holder.code == "self.total = torch.zeros(8)" and holder.line is not None
    assert [h.path for h in torchmem.holders(slotted.kept)] == ["slotted.kept"]
    del stats, logs, slotted


def test_a_numpy_array_that_shares_the_tensor_memory():
    # `t.numpy()` keeps `t` as the array's `.base`; the array shows gc no references
    frames = [torch.arange(6.0).reshape(2, 3).numpy()[1:]]  # a view of the shared array
    ref = weakref.ref(frames[0].base.base)
    (holder,) = torchmem.holders(ref())
    assert holder.path == "frames[0].base.base" and holder.kind == "attribute"
    del frames
    gc.collect()
    assert ref() is None  # the walk kept nothing


def _counter():
    kept = torch.arange(5.0)

    def read():
        return kept

    return read


def test_closure_cell():
    read = _counter()
    (holder,) = torchmem.holders(read())
    assert holder.path == "read.__closure__[0].cell_contents"
    assert holder.kind == "closure" and "`kept`" in holder.detail


@functools.lru_cache(maxsize=4)
def _bounded(i):
    return torch.full((3,), float(i))


@functools.lru_cache(maxsize=None)
def _unbounded(i):
    return torch.full((3,), float(i))


def _cached_result_holders(cached, i):
    cached.cache_clear()
    ref = weakref.ref(cached(i))  # nothing but the cache holds the result now
    found = torchmem.holders(ref())
    cached.cache_clear()
    return found


def test_lru_cache_entries_bounded_and_unbounded():
    # the wrapper is reached first as the helper's argument `cached`
    for found in (_cached_result_holders(_bounded, 7), _cached_result_holders(_unbounded, 7)):
        assert [h.path for h in found] == ["the cache of cached"]
        assert found[0].kind == "cache" and "7" in found[0].detail
    kept = _bounded(8)
    found = torchmem.holders(kept)
    assert [h.path for h in found] == ["kept", "the cache of _bounded"]
    _bounded.cache_clear()


class _Sample:
    def __init__(self, values):
        self.values = values

    @property
    @functools.lru_cache(maxsize=None)
    def spread(self):
        return self.values.std()


def test_an_lru_cache_under_property_keeps_the_instances_it_was_read_on():
    # the class is opened: the cache's key keeps `self`, hence what `self` holds
    sample = _Sample(torch.randn(50))
    assert sample.spread.ndim == 0
    ref = weakref.ref(sample.values)
    del sample
    try:
        found = torchmem.holders(ref())
        assert [h.path for h in found] == ["the cache of _Sample.spread.fget.values"]
        assert found[0].kind == "attribute"
    finally:
        _Sample.spread.fget.cache_clear()
    gc.collect()
    assert ref() is None


def test_views_parameters_grads_and_saved_tensors():
    base = torch.zeros(100)
    view = base[:10]
    assert set([h.path for h in torchmem.holders(base)]) == {"base", "view"}
    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    net(torch.ones(1, 2)).sum().backward()
    assert [h.path for h in torchmem.holders(net[0].weight.grad)] == ["net[0].weight.grad"]
    x = torch.randn(4, requires_grad=True)
    y = (x * 3).sin()
    saved = [h for h in torchmem.holders(x) if h.kind == "graph"]
    assert saved and saved[0].path == "y.grad_fn"
    del view, y


def test_exception_traceback_frames():
    def step():
        batch = torch.ones(6)
        raise ValueError(batch.shape)

    try:
        step()
    except ValueError as err:
        kept = err
    found = torchmem.holders(kept.__traceback__.tb_next.tb_frame.f_locals["batch"])
    assert [h.path for h in found] == ["kept.__traceback__"]
    assert "local `batch` of step" in found[0].detail
    del kept, found


def test_keeps_nothing_alive_and_finds_nothing_unreachable():
    t = torch.ones(1000)
    ref = weakref.ref(t)
    assert [h.path for h in torchmem.holders(t)] == ["t"]
    del t
    gc.collect()
    assert ref() is None  # holders() kept neither the tensor nor the paths' objects
    found = torchmem.holders(torch.ones(2))
    assert found == []  # an argument no variable holds


def _fill(store):
    store.append(torch.ones(4))


def test_an_initialisation_is_not_the_line_that_put_it_there():
    kept = []
    _fill(kept)  # filled through the helper's parameter: that append put it there
    (holder,) = torchmem.holders(kept[0])
    assert holder.path == "kept[0]" and holder.code == "store.append(torch.ones(4))"
    assert holder.line == _fill.__code__.co_firstlineno + 1
    del kept


_append_elsewhere = list.append  # not a function of this file: nothing of it can be read


def test_another_functions_variable_of_the_same_name_is_not_handed():
    kept = []
    _append_elsewhere(kept, torch.ones(4))  # the `_fill(kept)` above hands another `kept`
    (holder,) = torchmem.holders(kept[0])
    assert holder.path == "kept[0]" and holder.line is None and holder.code is None
    del kept


def _probe_into(layer, store):
    def probe(module, inputs, output):
        store.append(output.detach())
    return layer.register_forward_hook(probe)


def test_a_hook_closure_names_the_line_that_registered_the_hook():
    net = torch.nn.Linear(4, 4)
    _probe_into(net, [])
    net(torch.ones(2, 4))
    kept = next(iter(net._forward_hooks.values())).__closure__[0].cell_contents[0]
    (holder,) = [h for h in torchmem.holders(kept) if h.path.startswith("net.")]
    assert holder.path.startswith("net._forward_hooks[")
    assert holder.path.endswith("].__closure__[0].cell_contents[0]")
    assert holder.code == "return layer.register_forward_hook(probe)"
    del net, kept
