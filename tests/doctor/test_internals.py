"""The walks open objects implemented in C (``gc.get_referents``): ``.<internal TYPE>`` paths."""

from __future__ import annotations

import functools
import itertools
import sys

import numpy as np
import torch

from torchmem.doctor.culprit import Snapshot, take_snapshot
from torchmem.doctor.holders_api import holders
from torchmem.doctor.internals import binding_statement, internal_owner, internal_refs, native
from torchmem.doctor.source import parse_path

HERE = __file__


def user(filename: str) -> bool:
    return filename == HERE


def snap(step: int = 1) -> Snapshot:
    return take_snapshot(step, sys._getframe(1), None, user)


def _batches():
    while True:
        yield torch.zeros(256), torch.zeros(8)


def test_native_tells_c_classes_from_python_classes():
    class Plain:
        pass

    class Sub(dict):
        pass

    assert native(itertools.cycle) and native(map) and native(np.ndarray)
    assert native(type(functools.lru_cache(None)(len)))
    assert not native(Plain) and not native(torch.nn.Linear)
    assert native(Sub)  # its dict part is C: the walks open dicts by their own rule


def test_cycle_keeps_what_it_yielded_under_an_internal_path():
    stream = itertools.cycle(_batches())
    for _ in range(5):
        x, y = next(stream)
    s = snap()
    stats = s.paths["stream.<internal list>"]
    assert stats.kind == "internal" and stats.items == 5
    # five (256,) + (8,) pairs: the last pair is also held by x and y, walked first
    assert stats.tensors == 8 and stats.storage_bytes == 4 * (256 * 4 + 8 * 4)
    assert s.paths["stream"].tensors == 8
    assert s.paths["x"].tensors == 1
    del stream, x, y


def test_a_variable_keeps_what_it_also_reaches_through_a_c_object():
    pool = [torch.zeros(100) for _ in range(4)]
    it = iter(pool)
    s = snap()
    assert s.paths["pool"].tensors == 4
    # the list is the variable's: the iterator's internal reference adds no path
    assert not any(p.startswith("it.") for p in s.paths)
    assert s.paths["it"].tensors == 0
    del pool, it


def test_lru_cache_and_map_objects_are_opened():
    @functools.lru_cache(maxsize=None)
    def embed(i: int) -> torch.Tensor:
        return torch.zeros(64) + i

    for i in range(3):
        embed(i)
    mapped = map(torch.zeros, [10, 20])
    s = snap()
    cache = [p for p in s.paths if p.startswith("embed.<internal dict")]
    assert cache and s.paths[cache[0]].tensors == 3
    assert s.paths["embed"].storage_bytes == 3 * 64 * 4
    assert "mapped.<internal tuple>" in s.paths  # its iterators
    embed.cache_clear()
    del embed, mapped


def test_objects_visited_stay_proportional_to_what_is_held():
    # C objects with nothing inside (numpy arrays, torch.device) add no path and one
    # visit each; a cycle over n batches adds the list, n tuples and 2n tensors
    arrays = [np.zeros(16) for _ in range(200)]
    devices = [torch.device("cpu") for _ in range(50)]
    rng = np.random.default_rng(0)
    stream = itertools.cycle(_batches())
    for _ in range(100):
        next(stream)
    s = snap()
    opened = [p for p in s.paths if ".<internal " in p]
    assert len(opened) <= 8, opened
    # roots and their items (arrays, devices), the cycle's list, its tuples and tensors,
    # the generator and what numpy's Generator references: a few more than the items
    held = 200 + 50 + 1 + 100 + 200
    assert held <= s.objects <= held + 60, s.objects
    del arrays, devices, rng, stream


def test_holders_name_a_path_through_a_c_object():
    stream = itertools.cycle(_batches())
    first = next(stream)[0]
    next(stream)
    found = holders(first)
    paths = [h.path for h in found]
    assert "first" in paths
    assert "stream.<internal list>[0][0]" in paths  # the first item of cycle's own list
    del stream, first


def test_internal_paths_map_back_to_the_object_in_the_source():
    assert internal_owner("self.stream.<internal list>") == "self.stream"
    assert internal_owner("logs['a']") is None
    assert parse_path("self.stream.<internal list>[3]") == ["self", "stream"]
    refs = [step for _, step in internal_refs(zip([1], [2]))]
    assert refs == [".<internal tuple>", ".<internal tuple #2>"]


def test_the_binding_statement_is_the_call_of_the_type_not_a_function_of_that_name(tmp_path):
    # a generator named like the C type, wrapped in iter(): that branch binds no `cycle`
    script = tmp_path / "loader.py"
    script.write_text(
        "import itertools\n"
        "def cycle(data):\n"
        "    while True:\n"
        "        yield from data\n"
        "def prepare(handlers, data, train):\n"
        "    if train:\n"
        "        handlers.stream = iter(cycle(data))\n"
        "    else:\n"
        "        handlers.stream = itertools.cycle(data)\n"
        "    other = cycle(data)\n", encoding="utf-8")
    stmt = binding_statement("handlers.stream.<internal list>", [str(script)], "prepare", "cycle")
    assert stmt is not None and stmt.line == 9
    # a bare call of the file's own function of that name binds no C object
    assert binding_statement("other.<internal list>", [str(script)], "prepare", "cycle") is None
